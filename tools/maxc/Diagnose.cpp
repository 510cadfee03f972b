#include "Diagnose.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Version.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>

namespace maxc::cli {

int exit_code_for(const DiagnosticEngine &diagnostics) {
  for (const Diagnostic &d : diagnostics.diagnostics())
    if (d.severity == Severity::error && d.code == ErrorCode::Internal)
      return kInternalError;
  return diagnostics.has_errors() ? kInputError : kSuccess;
}

int finish(const GlobalOptions &global, const DiagnosticEngine &diagnostics) {
  if (global.diagnostics == DiagnosticsFormat::json) {
    std::cout << diagnostics.to_json() << std::flush;
  } else if (global.diagnostics == DiagnosticsFormat::sarif) {
    std::cout << diagnostics.to_sarif(maxc_version()) << std::flush;
  } else {
    for (const Diagnostic &d : diagnostics.diagnostics())
      if (!global.quiet || d.severity == Severity::error)
        std::cerr << d.to_text() << "\n";
    if (diagnostics.error_count() > 1 && !global.quiet)
      std::cerr << diagnostics.error_count() << " errors\n";
  }
  return exit_code_for(diagnostics);
}

void write_output(const std::string &path, const std::string &text, DiagnosticEngine &diagnostics) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    return;
  }
  try {
    write_file_atomically(path, text);
  } catch (const Error &e) {
    diagnostics.error(e, path, "");
  }
}

namespace {

// "NAME=VALUE" → (NAME, VALUE); empty name on malformed text.
std::pair<std::string, std::string> split_assignment(const std::string &text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return {"", ""};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

} // namespace

std::map<std::string, std::string> parse_input_files(const std::vector<std::string> &inputs,
                                                     DiagnosticEngine &diagnostics) {
  std::map<std::string, std::string> out;
  for (const std::string &i : inputs) {
    auto [name, file] = split_assignment(i);
    if (name.empty())
      diagnostics.error(ErrorCode::InvalidArgument, "", "--input", "expected NAME=FILE.npy, got '" + i + "'");
    else if (!out.emplace(name, file).second)
      diagnostics.error(ErrorCode::InvalidArgument, "", "--input", "input '" + name + "' is given twice");
  }
  return out;
}

LoadOptions load_options(const GlobalOptions &global) {
  LoadOptions load;
  load.dims = global.onnx_dims;
  load.bound_inputs = global.bound_inputs;
  load.max_dims = global.max_dims;
  load.dedup = !global.no_dedup;
  load.fuse_qdq = !global.no_qdq_fusion;
  load.state = global.state;
  return load;
}

void use_graph_input_names(std::map<std::string, std::string> &input_files, const LoadedModel &model) {
  std::set<std::string> inputs;
  for (ValueId id : model.graph->input_ids())
    inputs.insert(model.graph->value_info(id).name);
  for (const auto &[graph_name, source_name] : model.source_names) { // outputs' names too: inputs only
    auto it = inputs.count(graph_name) ? input_files.find(source_name) : input_files.end();
    if (it == input_files.end() || input_files.count(graph_name))
      continue;
    input_files.emplace(graph_name, it->second);
    input_files.erase(it);
  }
}

void print_quantized_layers(const std::vector<QuantizedLayer> &layers, const GlobalOptions &global) {
  const std::string &kind = global.quantize_weights;
  if (kind.empty() || global.quiet)
    return;
  double worst = 0;
  int64_t weights = 0;
  for (const QuantizedLayer &l : layers) {
    std::fprintf(stderr, "maxc: %s %s [N %lld, K %lld]: relative error %.4g\n", kind.c_str(), l.weight.c_str(),
                 static_cast<long long>(l.n), static_cast<long long>(l.k), l.relative_error);
    worst = std::max(worst, l.relative_error);
    weights += l.n * l.k;
  }
  std::fprintf(stderr, "maxc: --quantize-weights %s: %zu weights (%lld values) quantized, worst relative error %.4g\n",
               kind.c_str(), layers.size(), static_cast<long long>(weights), worst);
}

void quantize_loaded_weights(const GlobalOptions &global, LoadedModel &model, const std::string &file,
                             DiagnosticEngine &diagnostics) {
  std::vector<QuantizedLayer> layers;
  driver::quantize_loaded_weights(model, global.quantize_weights, file, diagnostics, layers);
  if (model.graph)
    print_quantized_layers(layers, global);
}

LoadedModel load_model_to_run(const GlobalOptions &global, const std::string &model, const std::string &weights,
                              DimBindings &run_dims, DiagnosticEngine &diagnostics,
                              const std::map<std::string, HostTensor> &input_values) {
  LoadOptions load = load_options(global);
  load.weights_path = weights;
  load.input_values = input_values;
  load.dims_may_be_run_values = true;
  LoadedModel loaded = load_model(model, load, diagnostics);
  quantize_loaded_weights(global, loaded, model, diagnostics);
  run_dims.clear();
  if (!loaded.graph)
    return loaded;
  for (const auto &[name, value] : global.onnx_dims)
    if (!loaded.pinned_dims.count(name))
      run_dims[name] = value;
  try {
    check_dim_names(*loaded.graph, run_dims);
  } catch (const Error &e) {
    diagnostics.error(e);
  }
  return loaded;
}

} // namespace maxc::cli
