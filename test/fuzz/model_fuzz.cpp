// libFuzzer target for the model loader: the maxc model format (parser,
// static checks, tracer with declared-shape weights) and the graph JSON
// reader. Any input must load or produce diagnostics; crashes, sanitizer
// reports, hangs and stray exceptions are bugs.
#include "maxc/Frontend/ModelLoader.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  maxc::DiagnosticEngine diagnostics;
  maxc::LoadOptions options;
  options.synthesize_weights = true;
  options.max_statements = 20000;
  maxc::LoadedModel model = maxc::load_model_text(text, "fuzz.json", options, diagnostics);
  if (model.graph && diagnostics.has_errors())
    __builtin_trap(); // a graph must never come with errors
  return 0;
}
