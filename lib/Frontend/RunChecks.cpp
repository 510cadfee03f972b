// Checks on a run request made before anything is allocated: --dim names,
// tensor byte sizes and the memory budget (--max-memory).
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Interpreter/Interpreter.h"

#include <optional>
#include <set>
#include <unistd.h>

namespace maxc {

std::optional<uint64_t> tensor_byte_size(DType dtype, const std::vector<int64_t> &shape) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return std::nullopt;
  for (int64_t d : shape) // a zero anywhere makes the tensor empty, whatever the other dims
    if (d == 0)
      return 0;
  if (n > kMaxTensorBytes)
    return std::nullopt;
  return n;
}

uint64_t default_max_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0)
    return uint64_t(16) << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::optional<uint64_t> parse_byte_size(const std::string &text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, uint64_t(text[i] - '0'), &n))
      return std::nullopt;
    ++i;
  }
  if (i == 0)
    return std::nullopt;
  std::string unit = text.substr(i);
  int shift = 0;
  if (!unit.empty()) {
    const std::string letters = "KMGT";
    size_t k = letters.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos)
      return std::nullopt;
    shift = 10 * static_cast<int>(k + 1);
    std::string rest = unit.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "iB"))
      return std::nullopt;
  }
  if (shift && n > (kMaxTensorBytes >> shift))
    return std::nullopt;
  n <<= shift;
  if (n > kMaxTensorBytes)
    return std::nullopt;
  return n;
}

namespace {

std::string describe_value(const Graph &graph, ValueId id) {
  const ValueInfo &info = graph.value_info(id);
  std::string out = "%" + std::to_string(id);
  if (!info.name.empty())
    out = "'" + info.name + "' (" + out + ")";
  if (info.producer >= 0) {
    const Node &n = graph.nodes()[static_cast<size_t>(info.producer)];
    return "tensor " + out + ", the result of " + n.op + (n.name.empty() ? "" : " '" + n.name + "'");
  }
  return "input " + out;
}

/// "<what> has no symbolic <kind> named 'NAME' (its dims: a, b)", or none
/// when `known` has NAME.
std::optional<std::string> unknown_dim(const std::string &name, const std::set<std::string> &known,
                                       const std::string &what, const std::string &kind) {
  if (known.count(name))
    return std::nullopt;
  std::string list;
  for (const std::string &s : known)
    list += (list.empty() ? "" : ", ") + s;
  return what + " has no symbolic " + kind + " named '" + name + "'" +
         (list.empty() ? " (it has none)" : " (its dims: " + list + ")");
}

} // namespace

void check_dim_names(const Graph &graph, const DimBindings &dims) {
  const std::vector<std::string> symbol_list = dim_symbols(graph);
  const std::set<std::string> symbols(symbol_list.begin(), symbol_list.end());
  for (const auto &[name, value] : dims)
    if (auto message = unknown_dim(name, symbols, "model '" + graph.name() + "'", "dim"))
      throw Error(ErrorCode::InvalidArgument, *message, "--dim");
}

void report_unknown_dims(const std::map<std::string, int64_t> &dims, const std::set<std::string> &known,
                         const std::string &path, DiagnosticEngine &diagnostics) {
  for (const auto &[name, value] : dims)
    if (auto message = unknown_dim(name, known, path, "input dim"))
      diagnostics.error(ErrorCode::InvalidArgument, "", "--dim", *message);
}

namespace {

// Checks every value of `graph` against the limits and returns their total
// bytes plus the largest total of a subgraph body (the reference interpreter
// holds one body's values at a time, besides all of the caller's).
uint64_t graph_bytes(const Graph &graph, const DimBindings &dims, uint64_t max_bytes, const std::string &where) {
  uint64_t total = 0;
  auto add = [&](uint64_t bytes, const std::string &what) {
    total += bytes; // no overflow: each term is at most 2^62 and the sum stays under 2 * max_bytes
    if (total > max_bytes)
      throw Error(ErrorCode::MemoryBudget, "the run needs more than " + std::to_string(max_bytes) +
                                               " bytes (--max-memory) for its tensors together; " + what + " adds " +
                                               std::to_string(bytes));
  };
  for (size_t i = 0; i < graph.num_values(); ++i) {
    ValueId id = static_cast<ValueId>(i);
    const TensorType &type = graph.type_of(id);
    std::vector<int64_t> shape;
    try {
      shape = evaluate_shape(type.shape, dims);
    } catch (const Error &) {
      continue; // an unbound dim: the run reports it
    }
    std::optional<uint64_t> bytes = tensor_byte_size(type.dtype, shape);
    std::string what = describe_value(graph, id) + where + ", " + std::string(dtype_name(type.dtype)) +
                       shape_to_string(make_shape(shape));
    if (!bytes)
      throw Error(ErrorCode::MemoryBudget, what + ", would need more than 2^62 bytes");
    if (*bytes > max_bytes)
      throw Error(ErrorCode::MemoryBudget, what + ", needs " + std::to_string(*bytes) +
                                                " bytes, more than the memory budget of " + std::to_string(max_bytes) +
                                                " bytes (--max-memory)");
    add(*bytes, what);
  }
  uint64_t largest_body = 0;
  std::string largest;
  for (const auto &[name, sub] : graph.subgraphs()) {
    uint64_t body = graph_bytes(*sub, dims, max_bytes, " in subgraph '" + name + "'");
    if (body > largest_body) {
      largest_body = body;
      largest = "subgraph '" + name + "'";
    }
  }
  if (largest_body)
    add(largest_body, "a call of " + largest);
  return total;
}

} // namespace

void check_run_memory(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                      uint64_t max_bytes) {
  bind_input_dims(graph, inputs, dims);
  graph_bytes(graph, dims, max_bytes, "");
}

} // namespace maxc
