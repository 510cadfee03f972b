// Structural checks on JSON text that run before any DOM is built: nesting
// depth (so a hostile file cannot make a recursive copy, printer or
// destructor overflow the stack, or a parser use memory quadratic in the
// depth) and duplicate keys (which nlohmann keeps silently, last one wins).
//
// Every JSON reader in maxc (model files, graph JSON, safetensors headers)
// runs check_json_structure first and reports what it finds with the JSON
// pointer of the offending element.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace maxc {

/// The deepest nesting of arrays and objects any maxc JSON input may have.
/// Real models need well under 10 levels; graph JSON under 8.
constexpr size_t kMaxJsonDepth = 64;

struct JsonIssue {
  enum class Kind { too_deep, duplicate_key } kind = Kind::too_deep;
  /// The unescaped reference tokens of the element (the container that is
  /// one level too deep, or the repeated key).
  std::vector<std::string> path;
  std::string message;
  /// RFC 6901 JSON pointer of `path` ("" for the root).
  std::string pointer() const;
};

/// Scans `text` with a streaming (SAX) parser, building nothing. Reports
/// every duplicate key (in document order) and, if the nesting goes deeper
/// than `max_depth`, the first container that does (and stops there).
/// Syntax errors are not reported: they stop the scan, and the parser that
/// builds the document words them with a line and column.
std::vector<JsonIssue> check_json_structure(std::string_view text, size_t max_depth = kMaxJsonDepth);

/// RFC 6901 escaping of one reference token ("a/b" → "a~1b").
std::string json_pointer_escape(const std::string &token);

} // namespace maxc
