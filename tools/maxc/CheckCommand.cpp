// maxc check: validate a model and its weights, reporting every problem.
#include "Diagnose.h"

#include "maxc/Frontend/ModelLoader.h"

#include <iostream>

namespace maxc::cli {

int run_check(const GlobalOptions &global, const CheckOptions &options) {
  DiagnosticEngine diagnostics;
  diagnostics.set_warnings_as_errors(global.warnings_as_errors);
  LoadOptions load = load_options(global);
  load.weights_path = options.weights;
  load.synthesize_weights = options.no_weights;
  LoadedModel model = load_model(options.model, load, diagnostics);
  quantize_loaded_weights(global, model, options.model, diagnostics);
  int code = finish(global, diagnostics);
  if (code == kSuccess && !global.quiet && global.diagnostics == DiagnosticsFormat::text)
    std::cerr << options.model << ": ok (" << model.graph->nodes().size() << " nodes, "
              << model.stats.subgraph_definitions << " subgraph definitions, " << model.params.size()
              << " weights)\n";
  return code;
}

} // namespace maxc::cli
