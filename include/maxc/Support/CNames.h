// C names derived from a model's names (inputs, outputs, dims): the one
// mangler (docs/manifest.md, "C names"). The front ends name a graph's
// inputs and outputs through it, and describe_interface (Codegen/ModelAbi)
// applies it again, which leaves its own results unchanged.
#pragma once

#include <set>
#include <string>

namespace maxc {

/// True for a valid C identifier that is not a C or C++ keyword.
bool is_c_identifier(const std::string &name);

/// True when `name` cannot be used as a C name in a generated header: a C
/// or C++ keyword, a reserved identifier (_X..., __...), a name the C
/// library defines as a macro or object (NULL, errno, stdin, ...).
bool is_reserved_c_name(const std::string &name);

/// Deterministic (depends on the names in order only) and distinct
/// case-sensitively and case-insensitively (the header's macros upper-case
/// the name). [A-Za-z0-9_] only, no "__", no leading or trailing '_'; a name
/// that is empty or starts with a digit gets `fallback` in front; a reserved
/// one gets "_v"; a taken one "_2", "_3", ... Idempotent: mangling a result
/// again, in the same order, gives it back.
class CNameMangler {
public:
  std::string mangle(const std::string &name, const std::string &fallback);

private:
  std::set<std::string> used_; // upper-cased: x and X would give the same macros
};

} // namespace maxc
