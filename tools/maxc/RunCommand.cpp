// maxc run: execute a model on the reference interpreter with .npy inputs,
// writing one .npy per output.
#include "Diagnose.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Npy.h"
#include "maxc/Interpreter/Interpreter.h"

#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc::cli {

int run_run(const GlobalOptions &global, const RunOptions &options) {
  DiagnosticEngine diagnostics;
  // Devices: the interpreter, or a registered backend whose code runs here.
  if (options.device != "reference" && options.device != "cpu" && options.device != "amdgpu-emu" &&
      options.device != "cuda") {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--device",
                      "unknown device '" + options.device + "' (expected reference, cpu, amdgpu-emu or cuda)");
    return finish(global, diagnostics);
  }
  if (options.threads < 1 || (options.threads != 1 && options.device != "cpu")) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--threads",
                      "--threads takes a count >= 1, and only with --device cpu");
    return finish(global, diagnostics);
  }
  DimBindings dims = parse_dim_values(options.dims, diagnostics);
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

  LoadedModel model = load_model_to_run(global, options.model, options.weights, dims, diagnostics);
  if (!model.graph)
    return finish(global, diagnostics);
  const Graph &graph = *model.graph;

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
    if (options.device == "reference")
      outputs = Interpreter::run(graph, inputs, dims);
    else // "cpu"; "amdgpu-emu": the GPU kernels, every work-item emulated on the CPU; "cuda": on an NVIDIA GPU
      outputs = driver::run_on_host(options.device, graph, inputs, dims, 2, options.threads);
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
