// Greedy generation (`maxc run --generate`, Driver/Generate.h): the model's
// state buffers are allocated here (zeroed, `max_context` rows) and kept
// across steps; each step passes the tokens not yet in the state, with
// `past` and the advance dim bound, and reads the last logits row.
#include "maxc/Driver/Generate.h"

#include "maxc/Driver/Compile.h"
#include "maxc/IR/Graph.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

namespace maxc::driver {

namespace {

[[noreturn]] void unfit(const std::string &why) {
  throw Error(ErrorCode::InvalidArgument, "--generate: " + why);
}

/// argmax of the last `vocab` elements (the first of equal maxima), and the
/// gap to the runner-up.
std::pair<int64_t, double> last_row_argmax(const HostTensor &logits, int64_t vocab) {
  int64_t base = logits.numel() - vocab, best = 0;
  double top = -std::numeric_limits<double>::infinity(), second = top;
  for (int64_t v = 0; v < vocab; ++v) {
    double x = logits.get_f64(base + v);
    if (x > top) {
      second = top;
      top = x;
      best = v;
    } else if (x > second) {
      second = x;
    }
  }
  return {best, top - second};
}

} // namespace

GenerateResult generate(const Graph &graph, const HostTensor &prompt, const DimBindings &dims,
                        const GenerateOptions &options) {
  const std::optional<ModelState> &state = graph.symbol_table().model_state();
  if (options.new_tokens < 1)
    unfit("the token count must be at least 1, got " + std::to_string(options.new_tokens));
  if (!is_integer(prompt.dtype()) || prompt.numel() < 1)
    unfit("the prompt must hold at least one integer token (got " + std::string(dtype_name(prompt.dtype())) + ", " +
          std::to_string(prompt.numel()) + " elements)");
  if (graph.output_ids().empty())
    unfit("the model has no outputs (the first must be the logits)");

  // The inputs: state buffers, and exactly one tokens input.
  const std::vector<ValueId> &inputs = graph.input_ids();
  std::set<std::string> buffers;
  if (state)
    buffers.insert(state->buffers.begin(), state->buffers.end());
  size_t token_input = inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string &name = graph.value_info(inputs[i]).name;
    if (buffers.count(name))
      continue;
    if (token_input != inputs.size())
      unfit("the model takes inputs '" + graph.value_info(inputs[token_input]).name + "' and '" + name +
            "' besides its state; it must take only the tokens" +
            (state ? std::string() : " (ONNX: --state auto makes KV-cache inputs model state)"));
    token_input = i;
  }
  if (token_input == inputs.size())
    unfit("the model has no tokens input");
  const TensorType &token_type = graph.type_of(inputs[token_input]);
  const std::string &token_name = graph.value_info(inputs[token_input]).name;
  if (!is_integer(token_type.dtype))
    unfit("the tokens input '" + token_name + "' is " + token_type.to_string() + ", not integers");

  // The sequence dim: the state's advance, or the tokens' one free symbol.
  std::string seq;
  int64_t chunk = 0; // a static advance: steps of exactly this many tokens
  if (state) {
    if (state->advance.is_symbol())
      seq = state->advance.symbol();
    else if (state->advance.is_static())
      chunk = state->advance.value();
    else
      unfit("the state's advance '" + state->advance.to_string() + "' is neither one symbol nor a number");
  } else {
    for (const Dim &d : token_type.shape)
      for (const std::string &s : d.symbols())
        if (!dims.count(s) && s != seq) {
          if (!seq.empty())
            unfit("the model has no state and its tokens input '" + token_name + "' " + token_type.to_string() +
                  " has more than one free symbolic dim ('" + seq + "', '" + s + "'); bind all but the sequence "
                  "with --dim");
          seq = s;
        }
    if (seq.empty())
      unfit("the model has no state (a KV cache; ONNX: --state) and its tokens input '" + token_name + "' " +
            token_type.to_string() + " has no symbolic sequence dim to grow");
  }
  for (const Dim &d : token_type.shape)
    if (!(d.is_symbol() || (d.is_static() && d.value() == 1)))
      unfit("the tokens input '" + token_name + "' " + token_type.to_string() + " must be one row of tokens along " +
            (seq.empty() ? std::string("the state's advance") : "its sequence dim '" + seq + "'") +
            ", its other dims 1; " + d.to_string() + " is not");
  const int64_t n_prompt = prompt.numel();
  if (chunk > 0 && (chunk != 1 && n_prompt % chunk != 0))
    unfit("the model advances by " + std::to_string(chunk) + " tokens a step; the prompt's " +
          std::to_string(n_prompt) + " tokens are not a multiple of it");

  DimBindings base = dims;
  for (const Dim &d : token_type.shape) // e.g. batch: 1
    for (const std::string &s : d.symbols())
      if (s != seq && (!state || s != state->length))
        base.emplace(s, 1);

  // The state: zeroed buffers of max_context rows.
  std::vector<HostTensor> feed(inputs.size());
  int64_t capacity = options.max_context > 0 ? options.max_context : n_prompt + options.new_tokens;
  if (state) {
    int64_t needed = n_prompt + options.new_tokens - 1;
    if (capacity < needed)
      unfit("--max-context " + std::to_string(capacity) + " has no room for the prompt's " +
            std::to_string(n_prompt) + " tokens and " + std::to_string(options.new_tokens - 1) +
            " fed back (" + std::to_string(needed) + " rows)");
    base[state->capacity] = capacity;
    double bytes = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i == token_input)
        continue;
      const TensorType &type = graph.type_of(inputs[i]);
      std::vector<int64_t> shape = evaluate_shape(type.shape, base);
      double size = static_cast<double>(dtype_size(type.dtype));
      for (int64_t d : shape)
        size *= static_cast<double>(d);
      bytes += size;
      if (options.max_memory && bytes > static_cast<double>(options.max_memory))
        throw Error(ErrorCode::MemoryBudget, "--generate: the state buffers of " + std::to_string(capacity) +
                                                 " rows take more than the memory budget of " +
                                                 std::to_string(options.max_memory) + " bytes (--max-memory)");
      HostTensor buffer(type.dtype, shape);
      std::memset(buffer.data(), 0, buffer.nbytes());
      feed[i] = std::move(buffer);
    }
  }

  GenerateResult result;
  result.stateful = state.has_value();
  result.min_margin = std::numeric_limits<double>::infinity();
  auto clock = [] { return std::chrono::steady_clock::now(); };
  std::unique_ptr<HostModel> compiled;
  if (options.device != "reference") {
    auto t0 = clock();
    compiled = std::make_unique<HostModel>(options.device, graph, options.opt_level, options.threads);
    result.compile_ms = std::chrono::duration<double, std::milli>(clock() - t0).count();
  }

  std::vector<int64_t> sequence = prompt.to_i64();
  size_t fed = 0; // tokens already in the state
  int64_t past = 0;
  bool prefill = true;
  while (static_cast<int64_t>(result.tokens.size()) < options.new_tokens) {
    // This step's tokens: those the state has not seen (in chunks of a
    // static advance), or the whole sequence without state.
    size_t begin = state ? fed : 0;
    size_t count = sequence.size() - begin;
    if (chunk > 0)
      count = std::min<size_t>(count, static_cast<size_t>(chunk));
    DimBindings bound = base;
    if (!seq.empty())
      bound[seq] = static_cast<int64_t>(count);
    if (state)
      bound[state->length] = past;
    std::vector<int64_t> shape = evaluate_shape(token_type.shape, bound);
    HostTensor tokens(token_type.dtype, shape);
    if (tokens.numel() != static_cast<int64_t>(count))
      unfit("the tokens input '" + token_name + "' " + token_type.to_string() + " holds " +
            std::to_string(tokens.numel()) + " tokens in a step of " + std::to_string(count) +
            " (its dims other than the sequence must be 1)");
    for (size_t k = 0; k < count; ++k)
      tokens.set_i64(static_cast<int64_t>(k), sequence[begin + k]);
    feed[token_input] = tokens;

    auto t0 = clock();
    std::vector<HostTensor> outputs =
        compiled ? compiled->run(feed, bound) : Interpreter::run(graph, feed, bound);
    double ms = std::chrono::duration<double, std::milli>(clock() - t0).count();
    (prefill ? result.prefill_ms : result.decode_ms) += ms;

    const HostTensor &logits = outputs.at(0);
    if (!is_float(logits.dtype()) || logits.rank() < 1 || logits.shape().back() < 1 ||
        logits.numel() != static_cast<int64_t>(count) * logits.shape().back())
      unfit("the first output must be logits with one row of the vocabulary per token fed (" +
            std::to_string(count) + " tokens), got " + std::string(dtype_name(logits.dtype())) + " of " +
            std::to_string(logits.numel()) + " elements");
    fed = begin + count;
    past += state ? static_cast<int64_t>(count) : 0;
    if (fed < sequence.size())
      continue; // more of the prompt to feed (a static advance)
    prefill = false;
    auto [token, margin] = last_row_argmax(logits, logits.shape().back());
    result.min_margin = std::min(result.min_margin, margin);
    result.tokens.push_back(token);
    sequence.push_back(token);
    if (options.on_token)
      options.on_token(token);
  }
  return result;
}

} // namespace maxc::driver
