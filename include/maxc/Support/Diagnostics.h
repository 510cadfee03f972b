// Diagnostics: problems reported as values, collected so that one run can
// report all of them (`maxc check`), and printed by the CLI as text or JSON.
//
//   model.json: /modules/Block/body/3/args/1: error[E0503]: 'h' is not defined
#pragma once

#include "maxc/Support/Error.h"

#include <string>
#include <vector>

namespace maxc {

enum class Severity { error, warning, note };

struct Diagnostic {
  Severity severity = Severity::error;
  ErrorCode code = ErrorCode::Internal;
  std::string file;    // may be empty
  std::string pointer; // JSON pointer or other location inside the file; may be empty
  std::string message;

  /// "file: pointer: error[E0503]: message".
  std::string to_text() const;
};

class DiagnosticEngine {
public:
  /// Adds a diagnostic; an identical one (same severity, code, place and
  /// message) is kept once, since a module body traced N times would
  /// otherwise repeat its problems N times.
  void report(Diagnostic diagnostic);
  void error(ErrorCode code, const std::string &file, const std::string &pointer, const std::string &message);
  void warning(ErrorCode code, const std::string &file, const std::string &pointer, const std::string &message);
  /// Records a thrown maxc::Error; its location becomes the pointer unless
  /// `pointer` is given.
  void error(const Error &error, const std::string &file = {}, const std::string &pointer = {});

  bool has_errors() const { return errors_ > 0; }
  size_t error_count() const { return errors_; }
  size_t warning_count() const { return warnings_; }
  const std::vector<Diagnostic> &diagnostics() const { return diagnostics_; }
  /// Treats warnings as errors from now on.
  void set_warnings_as_errors(bool on) { warnings_as_errors_ = on; }

  /// One line per diagnostic.
  std::string to_text() const;
  /// {"diagnostics": [{"severity","code","file","pointer","message"}...],
  ///  "errors": N, "warnings": M}
  std::string to_json() const;
  /// SARIF 2.1.0 (for CI code scanning): one run whose tool.driver is maxc
  /// `tool_version`, with a rule per documented error code (id "E0503",
  /// name, shortDescription) and one result per diagnostic: ruleId, level,
  /// message.text, the file as physicalLocation.artifactLocation.uri (a
  /// relative URI reference, or file:// for an absolute path) and the
  /// pointer as a logicalLocations[].fullyQualifiedName.
  std::string to_sarif(const std::string &tool_version) const;

private:
  std::vector<Diagnostic> diagnostics_;
  size_t errors_ = 0;
  size_t warnings_ = 0;
  bool warnings_as_errors_ = false;
};

std::string_view severity_name(Severity severity);

/// A documented error code: "E0503", its name ("UndefinedName") and meaning.
struct ErrorCodeInfo {
  ErrorCode code;
  const char *name;
  const char *description;
};
/// Every documented code (docs/diagnostics.md), in numeric order.
const std::vector<ErrorCodeInfo> &error_code_table();

} // namespace maxc
