// The parsed form of a maxc model file, before tracing. Private to
// lib/Frontend: attribute values stay JSON until the tracer substitutes
// module options into them.
#pragma once

#include "maxc/IR/HostTensor.h"
#include "maxc/IR/SymbolTable.h"
#include "maxc/IR/TensorType.h"
#include "maxc/Support/Diagnostics.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace maxc::frontend {

using json = nlohmann::ordered_json;

struct Operand {
  enum class Kind { value, param, constant, number } kind = Kind::value;
  std::string name; // value / param (without '@') / constant (without '#')
  double number = 0;
  std::string pointer;
};

struct Statement {
  std::vector<std::string> results;
  std::string op; // a registered op, "call" or "repeat"; empty if malformed (already reported)
  std::string callee; // module name for call/repeat
  std::vector<Operand> operands;
  json attrs = json::object();
  std::string pointer;       // the statement object
  std::string key_pointer;   // its [op, ...] array
  std::string attrs_pointer; // its attributes object (if any)
};

struct ParamDecl {
  json shape; // list of dims, possibly "$opt"
  DType dtype = DType::f32;
  std::string init;
  std::string pointer;
};

struct Module {
  std::string name;
  std::vector<std::string> args;
  std::vector<Statement> body;
  std::vector<std::string> returns;
  std::string returns_pointer;
  std::map<std::string, json> options;
  std::map<std::string, ParamDecl> params;
  bool subgraph = false;
  std::string subgraph_key;
  std::string pointer;
};

struct OutputDecl {
  std::string name;
  std::string value;
  std::string pointer;
};

struct ModelAst {
  std::string file; // as given, for diagnostics
  std::string dir;  // directory of the model file, for relative paths
  std::string name;
  std::string weights; // as written in the file (relative to dir)
  std::vector<std::pair<std::string, TensorType>> inputs;
  std::vector<OutputDecl> outputs;
  std::map<std::string, HostTensor> constants;
  std::map<std::string, Module> modules;
  Module main; // args = input names
  /// "state": inputs that are model state, updated in place (ModelState,
  /// IR/SymbolTable.h; checked against the inputs by the parser).
  std::optional<ModelState> state;
};

/// The deepest nesting of module calls (main calling A calling B is 2).
constexpr size_t kMaxModuleDepth = 256;

/// Parses and statically validates a model file's JSON; every problem goes to
/// `diagnostics`. Returns nullopt when the JSON cannot be used at all.
/// `max_statements`: refuse a model whose repeats and calls would make the
/// tracer execute more statements (LoadOptions::max_statements).
std::optional<ModelAst> parse_model(const std::string &text, const std::string &file, DiagnosticEngine &diagnostics,
                                    uint64_t max_statements = UINT64_MAX);

/// Throws maxc::Error (DimOverflow, at `pointer`) when a tensor of `type`
/// would exceed kMaxTensorBytes even with every symbolic dim 1. `what` names
/// it ("input 'x'", "the result").
void check_byte_size(const TensorType &type, const std::string &pointer, const std::string &what);

/// The number a JSON value stands for in a numeric position: a JSON number,
/// a boolean, or one of the strings "inf", "+inf", "-inf", "nan" (JSON has
/// no spelling for them). nullopt for anything else.
std::optional<double> json_number(const json &v);

/// Why `v` cannot be stored in `dtype` ("" when it can): integer dtypes need
/// an integer in range, bool 0 or 1, floating dtypes a value within their
/// finite range (it is rounded to the nearest representable one) or
/// inf/nan.
std::string not_representable(double v, DType dtype);

/// RFC 6901 escaping of one reference token ("a/b" → "a~1b").
std::string pointer_escape(const std::string &token);

} // namespace maxc::frontend
