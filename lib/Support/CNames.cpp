// C names for a model's names: the one mangler every generated name goes
// through (docs/manifest.md, "C names"), and the reserved-name tables.
#include "maxc/Support/CNames.h"

#include <cctype>

namespace maxc {

namespace {

// C (C89..C23) and C++ keywords and alternative tokens.
const std::set<std::string> &keywords() {
  static const std::set<std::string> k = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
      "true", "false", "alignas", "alignof", "constexpr", "nullptr", "static_assert", "thread_local", "typeof",
      "typeof_unqual", "asm", "catch", "char8_t", "char16_t", "char32_t", "class", "concept", "const_cast",
      "consteval", "constinit", "co_await", "co_return", "co_yield", "decltype", "delete", "dynamic_cast",
      "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "operator", "private",
      "protected", "public", "reinterpret_cast", "requires", "static_cast", "template", "this", "throw", "try",
      "typeid", "typename", "using", "virtual", "wchar_t", "and", "and_eq", "bitand", "bitor", "compl", "not",
      "not_eq", "or", "or_eq", "xor", "xor_eq"};
  return k;
}

// Names the C library (and what a program commonly includes before a
// generated header) defines as macros, objects or types, and the names the
// generated prototypes use themselves.
const std::set<std::string> &library_names() {
  static const std::set<std::string> n = {
      "NULL", "errno", "stdin", "stdout", "stderr", "EOF", "assert", "offsetof", "main", "size_t", "ptrdiff_t",
      "wchar_t", "FILE", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
      "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX",
      "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX",
      "SIZE_MAX", "INTPTR_MAX", "INTMAX_MAX", "INT8_C", "INT16_C", "INT32_C", "INT64_C", "UINT8_C", "UINT16_C",
      "UINT32_C", "UINT64_C", "INTMAX_C", "UINTMAX_C", "EDOM", "ERANGE", "EILSEQ", "HUGE_VAL", "INFINITY", "NAN",
      "math_errhandling", "complex", "imaginary", "I", "noreturn", "unix", "linux", "i386", "__cplusplus",
      "setjmp", "va_start", "va_end", "va_arg", "va_copy", "static_assert",
      // maxc's own parameter names in the generated prototypes
      "workspace", "ctx", "stream"};
  return n;
}

std::string upper(const std::string &s) {
  std::string out;
  for (char c : s)
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool is_identifier(const std::string &name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

} // namespace

bool is_reserved_c_name(const std::string &name) {
  if (keywords().count(name) || library_names().count(name))
    return true;
  // Reserved identifiers: _X..., __... (and C++: any name containing __).
  if (name.size() >= 2 && name[0] == '_' && (name[1] == '_' || std::isupper(static_cast<unsigned char>(name[1]))))
    return true;
  return name.find("__") != std::string::npos;
}

bool is_c_identifier(const std::string &name) { return is_identifier(name) && !keywords().count(name); }

std::string CNameMangler::mangle(const std::string &name, const std::string &fallback) {
  // [A-Za-z0-9_] only, no "__" (reserved in C++, and the header's macros
  // join names with '_'), no leading or trailing '_'.
  std::string out;
  for (char c : name) {
    char k = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (k != '_' || (!out.empty() && out.back() != '_'))
      out += k;
  }
  while (!out.empty() && out.back() == '_')
    out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = fallback + (out.empty() ? "" : "_" + out);
  if (is_reserved_c_name(out))
    out += "_v";
  std::string candidate = out;
  for (int i = 2; used_.count(upper(candidate)) || is_reserved_c_name(candidate); ++i)
    candidate = out + "_" + std::to_string(i);
  used_.insert(upper(candidate));
  return candidate;
}

} // namespace maxc
