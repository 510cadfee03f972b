#include "Diagnose.h"

#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Version.h"

#include <cstdio>
#include <iostream>

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

LoadOptions load_options(const GlobalOptions &global) {
  LoadOptions load;
  load.dims = global.onnx_dims;
  load.bound_inputs = global.bound_inputs;
  load.dedup = !global.no_dedup;
  return load;
}

} // namespace maxc::cli
