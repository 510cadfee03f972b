// libFuzzer target for the ONNX front end: the protobuf reader (model,
// tensors, external data references), graph checks, shape folding and op
// mapping. Any input must load or produce diagnostics; crashes, sanitizer
// reports, hangs, huge allocations and stray exceptions are bugs.
#include "maxc/Frontend/OnnxLoader.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  maxc::DiagnosticEngine diagnostics;
  maxc::LoadOptions options;
  // External data resolves under a folder that does not exist.
  maxc::LoadedModel model =
      maxc::load_onnx_model(bytes, "/nonexistent-maxc-fuzz/model.onnx", options, diagnostics);
  if (model.graph && diagnostics.has_errors())
    __builtin_trap(); // a graph must never come with errors
  // The same bytes with KV-cache pairs made model state (--state auto):
  // the pairs' search, the buffers and the Concat rewrite see every input.
  maxc::DiagnosticEngine state_diagnostics;
  options.state = "auto";
  maxc::LoadedModel stateful =
      maxc::load_onnx_model(bytes, "/nonexistent-maxc-fuzz/model.onnx", options, state_diagnostics);
  if (stateful.graph && state_diagnostics.has_errors())
    __builtin_trap();
  return 0;
}
