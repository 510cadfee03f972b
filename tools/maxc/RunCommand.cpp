// maxc run: execute a model on the reference interpreter with .npy inputs,
// writing one .npy per output.
#include "Diagnose.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Driver/Generate.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Npy.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Communicator.h"
#include "maxc/Transforms/Shard.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc::cli {

namespace {

/// `maxc run --generate N`: the prompt from --prompt or the tokens input's
/// file; the tokens printed on stdout, timings on stderr.
int run_generate(const GlobalOptions &global, const RunOptions &options, const Graph &graph, const DimBindings &dims,
                 const std::map<std::string, std::string> &input_files, uint64_t max_memory,
                 DiagnosticEngine &diagnostics) {
  if (options.generate < 1) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--generate",
                      options.generate_given ? "expected a token count >= 1, got " + std::to_string(options.generate)
                                            : "--prompt and --max-context need --generate N");
    return finish(global, diagnostics);
  }
  if (options.output_dir_given) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--output-dir",
                      "--generate writes no files (the tokens go to stdout); drop --output-dir");
    return finish(global, diagnostics);
  }
  HostTensor prompt;
  if (!options.prompt.empty()) {
    if (!input_files.empty()) {
      diagnostics.error(ErrorCode::InvalidArgument, "", "--prompt", "give the prompt with --prompt or --input, not both");
      return finish(global, diagnostics);
    }
    std::vector<int64_t> tokens;
    std::stringstream list(options.prompt);
    std::string item;
    while (std::getline(list, item, ',')) {
      char *end = nullptr;
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 0) {
        diagnostics.error(ErrorCode::InvalidArgument, "", "--prompt",
                          "expected comma-separated token ids (integers >= 0), got '" + item + "'");
        return finish(global, diagnostics);
      }
      tokens.push_back(v);
    }
    if (tokens.empty() || options.prompt.back() == ',') {
      diagnostics.error(ErrorCode::InvalidArgument, "", "--prompt", "expected comma-separated token ids, got '" + options.prompt + "'");
      return finish(global, diagnostics);
    }
    prompt = HostTensor::from_i64(DType::i64, {static_cast<int64_t>(tokens.size())}, tokens);
  } else if (input_files.size() == 1) {
    try {
      prompt = read_npy(input_files.begin()->second);
    } catch (const Error &e) {
      diagnostics.error(e, input_files.begin()->second, "");
      return finish(global, diagnostics);
    }
  } else {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--generate",
                      "give the prompt's tokens with --prompt 1,2,3 or one --input TOKENS=FILE.npy");
    return finish(global, diagnostics);
  }

  driver::GenerateOptions generate;
  generate.device = options.device;
  generate.new_tokens = options.generate;
  generate.max_context = options.max_context;
  if (options.max_context < 0) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--max-context",
                      "expected a row count >= 1, got " + std::to_string(options.max_context));
    return finish(global, diagnostics);
  }
  generate.threads = options.threads;
  generate.max_memory = max_memory;
  bool streaming = !global.quiet && ::isatty(STDOUT_FILENO);
  if (streaming)
    generate.on_token = [](int64_t token) {
      std::cout << token << ' ' << std::flush;
    };
  driver::GenerateResult result;
  try {
    result = driver::generate(graph, prompt, dims, generate);
  } catch (const Error &e) {
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }
  if (streaming) {
    std::cout << "\n";
  } else {
    for (size_t i = 0; i < result.tokens.size(); ++i)
      std::cout << (i ? " " : "") << result.tokens[i];
    std::cout << "\n";
  }
  if (!global.quiet) {
    int64_t decoded = static_cast<int64_t>(result.tokens.size()) - 1;
    char line[256];
    std::snprintf(line, sizeof line, "prefill: %lld tokens in %.2f ms; decode: %lld tokens in %.2f ms (%.1f tokens/s)%s\n",
                  static_cast<long long>(prompt.numel()), result.prefill_ms, static_cast<long long>(decoded),
                  result.decode_ms, decoded > 0 && result.decode_ms > 0 ? 1000.0 * decoded / result.decode_ms : 0.0,
                  result.stateful ? "" : " (no model state: every step re-runs the whole sequence)");
    std::cerr << line;
  }
  return finish(global, diagnostics);
}

} // namespace

int run_run(const GlobalOptions &global, const RunOptions &options) {
  DiagnosticEngine diagnostics;
  // Devices: the interpreter, or a registered backend whose code runs here.
  if (options.device != "reference" && options.device != "cpu" && options.device != "amdgpu-emu" &&
      options.device != "cuda") {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--device",
                      "unknown device '" + options.device + "' (expected reference, cpu, amdgpu-emu or cuda)");
    return finish(global, diagnostics);
  }
  if (options.tensor_parallel < 1 ||
      (options.tensor_parallel > 1 && options.device == "cuda")) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--tensor-parallel",
                      "--tensor-parallel takes a rank count >= 1, and runs on --device reference, cpu or "
                      "amdgpu-emu (docs/tensor-parallel.md)");
    return finish(global, diagnostics);
  }
  if (options.threads < 1 || (options.threads != 1 && options.device != "cpu")) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--threads",
                      "--threads takes a count >= 1, and only with --device cpu");
    return finish(global, diagnostics);
  }
  DimBindings dims; // --dim values of dims no input determines (load_model_to_run)
  std::map<std::string, std::string> input_files = parse_input_files(options.inputs, diagnostics);
  uint64_t max_memory = default_max_memory();
  if (!options.max_memory.empty()) {
    if (auto bytes = parse_byte_size(options.max_memory))
      max_memory = *bytes;
    else
      diagnostics.error(ErrorCode::InvalidArgument, "", "--max-memory",
                        "expected a byte count such as 1073741824, 512M or 8G, got '" + options.max_memory + "'");
  }
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  // The inputs' values, read once: the ONNX importer bounds dims read from
  // them (a Reshape's shape given as an input) and binds those a node needs
  // at import (Squeeze's axes), as --bind would.
  std::map<std::string, HostTensor> input_values;
  for (const auto &[name, file] : input_files) {
    try {
      input_values.emplace(name, read_npy(file));
    } catch (const Error &) {
      // reported when the input is read below
    }
  }
  LoadedModel model = load_model_to_run(global, options.model, options.weights, dims, diagnostics, input_values);
  if (!model.graph)
    return finish(global, diagnostics);
  const Graph &graph = *model.graph;
  for (const std::string &name : model.bound_from_values) {
    if (!global.quiet)
      std::cerr << "maxc: input '" << name << "' is bound to its value at import (as --bind " << name
                << "=FILE): a node needs it to fix axes or a rank\n";
    input_files.erase(name);
  }
  use_graph_input_names(input_files, model);

  if (options.generate_given || !options.prompt.empty() || options.max_context != 0) {
    if (options.tensor_parallel > 1) {
      diagnostics.error(ErrorCode::InvalidArgument, "", "--tensor-parallel",
                        "--generate runs one device; a tensor-parallel decode is a C program over the rank "
                        "artifacts (examples/tensor-parallel/llama_tp.c)");
      return finish(global, diagnostics);
    }
    return run_generate(global, options, graph, dims, input_files, max_memory, diagnostics);
  }

  std::vector<HostTensor> inputs;
  for (ValueId id : graph.input_ids()) {
    const std::string &name = graph.value_info(id).name;
    auto it = input_files.find(name);
    if (it == input_files.end()) {
      diagnostics.error(ErrorCode::InputMismatch, options.model, "",
                        "no data for input '" + name + "' (" + graph.type_of(id).to_string() + "); pass --input " +
                            name + "=FILE.npy");
      continue;
    }
    try {
      inputs.push_back(read_npy(it->second));
    } catch (const Error &e) {
      diagnostics.error(e, it->second, "");
    }
    input_files.erase(it);
  }
  for (const auto &[name, file] : input_files)
    diagnostics.error(ErrorCode::InputMismatch, "", "--input", "model '" + graph.name() + "' has no input named '" + name + "'");
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  std::vector<HostTensor> outputs;
  try {
    check_run_memory(graph, inputs, dims, max_memory);
    if (options.tensor_parallel > 1) {
      // Every rank's program on its own thread; the outputs are whole on
      // every rank: rank 0's are written.
      std::vector<std::unique_ptr<Graph>> ranks =
          shard_graph_ranks(graph, options.tensor_parallel, nullptr, global.shard_replicated);
      std::vector<std::vector<HostTensor>> per_rank = rank_inputs(graph, ranks, inputs);
      if (options.device != "reference") { // cpu, amdgpu-emu
        std::vector<const Graph *> programs;
        for (const auto &g : ranks)
          programs.push_back(g.get());
        outputs = driver::run_ranks_on_host(options.device, programs, per_rank, dims, 2, options.threads);
      } else {
        std::vector<std::vector<HostTensor>> results(ranks.size());
        run_ranks(options.tensor_parallel, [&](int r) { results[r] = Interpreter::run(*ranks[r], per_rank[r], dims); });
        outputs = results[0];
      }
    } else if (options.device == "reference") {
      outputs = Interpreter::run(graph, inputs, dims);
    } else { // "cpu"; "amdgpu-emu": the GPU kernels, every work-item emulated on the CPU; "cuda": on an NVIDIA GPU
      outputs = driver::run_on_host(options.device, graph, inputs, dims, 2, options.threads);
    }
  } catch (const Error &e) {
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }
  // Created when missing (and removed again if no output could be written).
  bool created = ::mkdir(options.output_dir.c_str(), 0777) == 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = i < graph.output_names().size() && !graph.output_names()[i].empty() ? graph.output_names()[i]
                                                                                           : "output" + std::to_string(i);
    std::string path = options.output_dir + "/" + name + ".npy";
    try {
      write_npy(path, outputs[i]);
      if (!global.quiet)
        std::cout << name << ": " << describe(outputs[i]) << " -> " << path << "\n";
    } catch (const Error &e) {
      diagnostics.error(e, path, "");
    }
  }
  if (created && diagnostics.has_errors())
    ::rmdir(options.output_dir.c_str()); // only succeeds when nothing was written
  return finish(global, diagnostics);
}

} // namespace maxc::cli
