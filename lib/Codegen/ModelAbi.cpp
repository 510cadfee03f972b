// The model ABI shared by every backend: interface, C names (one mangler),
// status table, C types, and the weights blob layout.
#include "maxc/Codegen/ModelAbi.h"

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/GraphSymbols.h"

#include <cctype>
#include <set>

namespace maxc {

const std::vector<StatusInfo> &status_table() {
  static const std::vector<StatusInfo> table = {
      {RunStatus::ok, "OK", "ok", "ok", true, true},
      {RunStatus::null_pointer, "ERROR_NULL_POINTER", "null pointer", "a buffer pointer is null", true, true},
      {RunStatus::invalid_dim, "ERROR_INVALID_DIM", "invalid dim", "a dim value is negative or too large", true,
       true},
      {RunStatus::out_of_memory, "ERROR_OUT_OF_MEMORY", "out of memory", "out of memory for the workspace", true,
       true},
      {RunStatus::weights_not_set, "ERROR_WEIGHTS_NOT_SET", "weights not set",
       "weights are not set (call the model's _set_weights first)", true, false},
      {RunStatus::weights_mismatch, "ERROR_WEIGHTS_MISMATCH", "weights mismatch",
       "the weights do not match this build (size, alignment or hash)", true, false},
      {RunStatus::no_device, "ERROR_NO_DEVICE", "no device", "no GPU device is visible to the HIP runtime", false,
       true},
      {RunStatus::no_matching_arch, "ERROR_NO_MATCHING_ARCH", "no matching arch",
       "the GPU's architecture has no code object in this build (recompile with --gpu ARCH)", false, true},
      {RunStatus::gpu_error, "ERROR_GPU", "gpu error", "a HIP call failed (%s_hip_error() gives its code)", false,
       true},
  };
  return table;
}

std::vector<StatusInfo> status_codes(bool gpu) {
  std::vector<StatusInfo> out;
  for (const StatusInfo &s : status_table())
    if (gpu ? s.gpu : s.cpu)
      out.push_back(s);
  return out;
}

const char *c_type_name(DType d) {
  switch (d) {
  case DType::f16: return "uint16_t"; // IEEE binary16 bits
  case DType::bf16: return "uint16_t"; // bfloat16 bits
  case DType::f32: return "float";
  case DType::f64: return "double";
  case DType::i8: return "int8_t";
  case DType::i32: return "int32_t";
  case DType::i64: return "int64_t";
  case DType::boolean: return "uint8_t"; // 0 or 1
  }
  return "void";
}

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

/// The one C-name mangler: every parameter name and header macro stem
/// derived from a model's names goes through it. Deterministic (depends on
/// the names in order only); distinct case-sensitively (parameters) and
/// case-insensitively (macros use the upper-cased name).
class CNameMangler {
public:
  std::string mangle(const std::string &name, const std::string &fallback) {
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

private:
  std::set<std::string> used_; // upper-cased: x and X would give the same macros
};

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

ModelInterface describe_interface(const Graph &graph, const std::string &name) {
  ModelInterface m;
  m.name = name;
  CNameMangler names;
  for (size_t i = 0; i < graph.input_ids().size(); ++i) {
    ValueId id = graph.input_ids()[i];
    const std::string &source = graph.value_info(id).name;
    m.inputs.push_back({names.mangle(source, "input" + std::to_string(i)), graph.type_of(id), source});
  }
  for (size_t i = 0; i < graph.output_ids().size(); ++i) {
    std::string source = i < graph.output_names().size() ? graph.output_names()[i] : "";
    m.outputs.push_back({names.mangle(source, "output" + std::to_string(i)), graph.type_of(graph.output_ids()[i]),
                         source});
  }
  m.symbols = dim_symbols(graph);
  for (size_t i = 0; i < m.symbols.size(); ++i)
    m.symbol_params.push_back(names.mangle(m.symbols[i], "dim" + std::to_string(i)));
  for (const auto &[cname, data] : graph.constants())
    m.constant_bytes += data.nbytes();
  for (const auto &[sname, sub] : graph.subgraphs())
    for (const auto &[cname, data] : sub->constants())
      m.constant_bytes += data.nbytes();
  m.subgraph_definitions = graph.subgraphs().size();
  for (const Node &n : graph.nodes())
    m.subgraph_calls += n.op == "call";
  return m;
}

namespace codegen {

std::string layout_constants(const Graph &lowered, std::map<std::pair<const Graph *, std::string>, uint64_t> &offsets) {
  return weights_blob(lowered, offsets).str();
}

} // namespace codegen

} // namespace maxc
