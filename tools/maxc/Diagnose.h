// Printing diagnostics and mapping them to exit codes, shared by commands.
#pragma once

#include "Commands.h"

#include "maxc/Support/Diagnostics.h"

namespace maxc::cli {

/// Prints the diagnostics (text to stderr, JSON to stdout) and returns the
/// exit code they imply.
int finish(const GlobalOptions &global, const DiagnosticEngine &diagnostics);

/// Exit code for a set of diagnostics: 2 if any is internal, 1 if any error.
int exit_code_for(const DiagnosticEngine &diagnostics);

/// Writes `text` to `path` atomically, or to stdout for "" / "-". Reports
/// failures to `diagnostics`.
void write_output(const std::string &path, const std::string &text, DiagnosticEngine &diagnostics);

} // namespace maxc::cli
