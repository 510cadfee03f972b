// Parses the maxc model format and checks everything that can be checked
// without tracing: field types, unknown keys, op and attribute names, value
// scoping, module references and cycles. Every problem is reported; parsing
// goes on after an error wherever the rest still makes sense.
#include "ModelAst.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/JsonCheck.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

namespace maxc::frontend {

std::string pointer_escape(const std::string &token) { return json_pointer_escape(token); }

std::optional<double> json_number(const json &v) {
  if (v.is_boolean())
    return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number())
    return v.get<double>();
  if (v.is_string()) {
    const std::string &t = v.get_ref<const std::string &>();
    if (t == "inf" || t == "+inf")
      return std::numeric_limits<double>::infinity();
    if (t == "-inf")
      return -std::numeric_limits<double>::infinity();
    if (t == "nan")
      return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

std::string not_representable(double v, DType dtype) {
  const std::string head = "the number " + json(v).dump() + " is not representable in " + std::string(dtype_name(dtype));
  if (std::isnan(v) || std::isinf(v))
    return is_float(dtype) ? "" : (std::isnan(v) ? "nan" : "an infinity") + std::string(" is not representable in ") +
                                      std::string(dtype_name(dtype));
  if (is_bool(dtype))
    return v == 0 || v == 1 ? "" : head + " (a bool is 0 or 1)";
  if (is_integer(dtype)) {
    const DTypeInfo &info = dtype_info(dtype);
    double lo = info.is_signed ? -std::ldexp(1.0, info.bits - 1) : 0.0;
    double end = std::ldexp(1.0, info.bits - (info.is_signed ? 1 : 0)); // the first value past the range
    if (v != std::floor(v))
      return head + " (not an integer)";
    if (v < lo || v >= end)
      return head + " (out of range)";
    return "";
  }
  bool finite = std::isfinite(HostTensor::scalar(dtype, v).get_f64(0)); // as the tensor will hold it
  return finite ? "" : head + " (outside its finite range; write \"inf\" or \"-inf\" for an infinity)";
}

namespace {

bool is_identifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Value names may contain dots and dashes for readability ("h.1", "attn-out").
bool is_value_name(const std::string &s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '@' || s[0] == '#' || s[0] == '$')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

const char *json_kind(const json &v) {
  switch (v.type()) {
  case json::value_t::null: return "null";
  case json::value_t::boolean: return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned: return "an integer";
  case json::value_t::number_float: return "a number";
  case json::value_t::string: return "a string";
  case json::value_t::array: return "an array";
  case json::value_t::object: return "an object";
  default: return "a value";
  }
}

class Parser {
public:
  Parser(const std::string &file, DiagnosticEngine &diags, uint64_t max_statements)
      : file_(file), diags_(diags), max_statements_(max_statements) {}

  std::optional<ModelAst> parse(const std::string &text) {
    json root;
    try {
      root = json::parse(text);
    } catch (const json::exception &e) { // parse_error, and out_of_range for huge numbers
      // nlohmann's message carries the line and column.
      std::string what = e.what();
      auto pos = what.find("parse error");
      diags_.error(ErrorCode::ModelSyntax, file_, "", "malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
      return std::nullopt;
    }
    if (!root.is_object()) {
      schema("", std::string("a model must be a JSON object, got ") + json_kind(root));
      return std::nullopt;
    }
    ModelAst ast;
    ast.file = file_;
    auto slash = file_.find_last_of('/');
    ast.dir = slash == std::string::npos ? "." : file_.substr(0, slash == 0 ? 1 : slash);

    check_keys(root, "", {"maxc", "name", "weights", "inputs", "outputs", "constants", "modules", "main", "description",
                          "state"});
    if (!root.contains("maxc"))
      schema("", "missing field 'maxc' (the format version; this maxc reads 1)");
    else if (!root["maxc"].is_number_integer() || root["maxc"].get<int64_t>() != 1)
      schema("/maxc", "unsupported format version " + root["maxc"].dump() + " (this maxc reads version 1)");

    ast.name = required_string(root, "", "name");
    if (!ast.name.empty() && !is_identifier(ast.name))
      schema("/name", "model name '" + ast.name + "' must be an identifier ([A-Za-z_][A-Za-z0-9_]*): it names generated C symbols");
    if (root.contains("weights")) {
      if (root["weights"].is_string())
        ast.weights = root["weights"].get<std::string>();
      else
        schema("/weights", std::string("expected a file path string, got ") + json_kind(root["weights"]));
    }
    if (root.contains("description") && !root["description"].is_string())
      schema("/description", "expected a string");

    parse_inputs(root, ast);
    if (root.contains("state"))
      parse_state(root["state"], ast);
    if (root.contains("constants"))
      parse_constants(root["constants"], ast);
    if (root.contains("modules")) {
      if (!root["modules"].is_object())
        schema("/modules", std::string("expected an object of module definitions, got ") + json_kind(root["modules"]));
      else
        for (const auto &[name, def] : root["modules"].items())
          parse_module(name, def, "/modules/" + pointer_escape(name), ast);
    }
    ast.main.name = "main";
    ast.main.pointer = "/main";
    for (const auto &in : ast.inputs)
      ast.main.args.push_back(in.first);
    if (!root.contains("main"))
      schema("", "missing field 'main' (the top-level list of statements)");
    else
      parse_body(root["main"], "/main", ast.main);
    parse_outputs(root, ast);

    // Second pass: things that need every module known.
    for (auto &[name, module] : ast.modules)
      check_scopes(module, ast);
    check_scopes(ast.main, ast);
    check_calls(ast);
    return ast;
  }

private:
  void schema(const std::string &pointer, const std::string &message) {
    diags_.error(ErrorCode::ModelSchema, file_, pointer, message);
  }

  void check_keys(const json &obj, const std::string &pointer, std::initializer_list<const char *> allowed) {
    for (const auto &[key, value] : obj.items()) {
      const std::string &k = key; // lambdas cannot capture structured bindings in C++17
      bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char *a) { return k == a; });
      if (!known) {
        std::string list;
        for (const char *a : allowed)
          list += (list.empty() ? "" : ", ") + std::string(a);
        schema(pointer + "/" + pointer_escape(key), "unknown field '" + key + "' (expected one of: " + list + ")");
      }
    }
  }

  std::string required_string(const json &obj, const std::string &pointer, const char *key) {
    if (!obj.contains(key)) {
      schema(pointer, std::string("missing field '") + key + "'");
      return "";
    }
    if (!obj[key].is_string()) {
      schema(pointer + "/" + key, std::string("expected a string, got ") + json_kind(obj[key]));
      return "";
    }
    return obj[key].get<std::string>();
  }

  std::optional<DType> dtype_of(const json &v, const std::string &pointer) {
    if (v.is_string())
      if (auto d = parse_dtype(v.get<std::string>()))
        return d;
    schema(pointer, "unknown dtype " + v.dump() + " (expected one of " + dtype_name_list() + ")");
    return std::nullopt;
  }

  std::optional<Shape> shape_of(const json &v, const std::string &pointer) {
    if (!v.is_array()) {
      schema(pointer, std::string("expected a shape (a list of dims), got ") + json_kind(v));
      return std::nullopt;
    }
    Shape shape;
    bool ok = true;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string p = pointer + "/" + std::to_string(i);
      try {
        if (v[i].is_number_integer() && v[i].get<int64_t>() >= 0)
          shape.emplace_back(v[i].get<int64_t>());
        else if (v[i].is_string())
          shape.push_back(Dim::parse(v[i].get<std::string>()));
        else {
          schema(p, "a dim must be a non-negative integer or a symbolic dim like \"batch\", got " + v[i].dump());
          ok = false;
        }
      } catch (const Error &e) {
        diags_.error(e.code(), file_, p, e.message());
        ok = false;
      }
    }
    return ok ? std::optional<Shape>(shape) : std::nullopt;
  }

  // "state": {"buffers": [input names], "length": "past", "advance": "seq"}:
  // the buffers are inputs [capacity, static dims...] with one capacity
  // symbol; `length` (rows filled before a run) is a symbol no input
  // declares; `advance` (rows a run appends) a dim expression.
  void parse_state(const json &st, ModelAst &ast) {
    const std::string p = "/state";
    if (!st.is_object()) {
      schema(p, std::string("expected {\"buffers\", \"length\", \"advance\"}, got ") + json_kind(st));
      return;
    }
    check_keys(st, p, {"buffers", "length", "advance"});
    ModelState state;
    state.length = required_string(st, p, "length");
    if (!state.length.empty() && !is_identifier(state.length))
      schema(p + "/length", "'" + state.length + "' must be a symbol (an identifier)");
    std::string advance = required_string(st, p, "advance");
    try {
      state.advance = Dim::parse(advance.empty() ? "0" : advance);
    } catch (const Error &e) {
      schema(p + "/advance", e.message());
    }
    if (!st.contains("buffers") || !st["buffers"].is_array() || st["buffers"].empty()) {
      schema(p + "/buffers", "expected a non-empty list of input names");
      return;
    }
    for (size_t i = 0; i < st["buffers"].size(); ++i) {
      std::string q = p + "/buffers/" + std::to_string(i);
      const json &b = st["buffers"][i];
      auto in = b.is_string() ? std::find_if(ast.inputs.begin(), ast.inputs.end(),
                                             [&](const auto &x) { return x.first == b.get<std::string>(); })
                              : ast.inputs.end();
      if (in == ast.inputs.end()) {
        schema(q, "expected the name of a declared input, got " + b.dump());
        continue;
      }
      const Shape &shape = in->second.shape;
      if (shape.empty() || !shape[0].is_symbol()) {
        schema(q, "state buffer '" + in->first + "' is " + in->second.to_string() +
                      ": its first dim must be a symbol (the capacity)");
        continue;
      }
      if (!state.capacity.empty() && shape[0].symbol() != state.capacity)
        schema(q, "state buffer '" + in->first + "' has capacity '" + shape[0].symbol() + "', another '" +
                      state.capacity + "': one capacity for every buffer");
      state.capacity = shape[0].symbol();
      for (size_t d = 1; d < shape.size(); ++d)
        if (!shape[d].is_static())
          schema(q, "state buffer '" + in->first + "' is " + in->second.to_string() + ": only its first dim may be symbolic");
      if (std::find(state.buffers.begin(), state.buffers.end(), in->first) != state.buffers.end())
        schema(q, "state buffer '" + in->first + "' is listed twice");
      state.buffers.push_back(in->first);
    }
    for (const auto &[name, type] : ast.inputs)
      for (const Dim &d : type.shape)
        for (const std::string &s : d.symbols())
          if (s == state.length)
            schema(p + "/length", "'" + s + "' is a dim of input '" + name +
                                      "': the state's length is passed (NAME_step: the state's own), not an input dim");
    // The buffers in input order (the C interface's).
    std::vector<std::string> ordered;
    for (const auto &[name, type] : ast.inputs)
      if (std::find(state.buffers.begin(), state.buffers.end(), name) != state.buffers.end())
        ordered.push_back(name);
    state.buffers = ordered;
    ast.state = state;
  }

  void parse_inputs(const json &root, ModelAst &ast) {
    if (!root.contains("inputs")) {
      schema("", "missing field 'inputs'");
      return;
    }
    const json &inputs = root["inputs"];
    if (!inputs.is_array()) {
      schema("/inputs", std::string("expected a list of inputs, got ") + json_kind(inputs));
      return;
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string p = "/inputs/" + std::to_string(i);
      const json &in = inputs[i];
      if (!in.is_object()) {
        schema(p, "expected {\"name\", \"dtype\", \"shape\"}");
        continue;
      }
      check_keys(in, p, {"name", "dtype", "shape"});
      std::string name = required_string(in, p, "name");
      if (!name.empty() && !is_value_name(name))
        schema(p + "/name", "input name '" + name + "' is not a valid value name");
      if (!name.empty() && !seen.insert(name).second)
        schema(p + "/name", "input '" + name + "' is declared twice");
      std::optional<DType> dtype;
      std::optional<Shape> shape;
      if (!in.contains("dtype"))
        schema(p, "missing field 'dtype'");
      else
        dtype = dtype_of(in["dtype"], p + "/dtype");
      if (!in.contains("shape"))
        schema(p, "missing field 'shape'");
      else
        shape = shape_of(in["shape"], p + "/shape");
      if (shape)
        for (size_t d = 0; d < shape->size(); ++d)
          if (!(*shape)[d].is_static() && !(*shape)[d].is_symbol())
            schema(p + "/shape/" + std::to_string(d),
                   "input dims must be integers or plain symbols (\"batch\"), not expressions: maxc binds them from the input at run time");
      if (!name.empty() && dtype && shape) {
        try {
          check_byte_size(TensorType(*dtype, *shape), p + "/shape", "input '" + name + "'");
        } catch (const Error &e) {
          diags_.error(e.code(), file_, e.location(), e.message()); // kept, so its uses do not cascade
        }
        ast.inputs.emplace_back(name, TensorType(*dtype, *shape));
      }
    }
  }

  void parse_constants(const json &constants, ModelAst &ast) {
    if (!constants.is_object()) {
      schema("/constants", "expected an object of named constants");
      return;
    }
    for (const auto &[name, def] : constants.items()) {
      std::string p = "/constants/" + pointer_escape(name);
      if (!def.is_object()) {
        schema(p, "expected {\"dtype\", \"shape\", \"value\" or \"values\"}");
        continue;
      }
      check_keys(def, p, {"dtype", "shape", "value", "values"});
      std::optional<DType> dtype = def.contains("dtype") ? dtype_of(def["dtype"], p + "/dtype") : std::nullopt;
      if (!def.contains("dtype"))
        schema(p, "missing field 'dtype'");
      std::optional<Shape> shape = def.contains("shape") ? shape_of(def["shape"], p + "/shape") : std::nullopt;
      if (!def.contains("shape"))
        schema(p, "missing field 'shape'");
      if (!dtype || !shape)
        continue;
      if (!shape_is_static(*shape)) {
        schema(p + "/shape", "constant shapes must be static");
        continue;
      }
      try {
        check_byte_size(TensorType(*dtype, *shape), p + "/shape", "constant '" + name + "'");
        uint64_t bytes = *tensor_byte_size(*dtype, static_sizes(*shape));
        if (bytes > default_max_memory())
          throw Error(ErrorCode::MemoryBudget,
                      "constant '" + name + "' needs " + std::to_string(bytes) + " bytes, more than this machine's " +
                          std::to_string(default_max_memory()) + " bytes of memory",
                      p + "/shape");
        HostTensor t(*dtype, static_sizes(*shape));
        if (def.contains("value") == def.contains("values")) {
          schema(p, "give exactly one of 'value' (fills the shape) or 'values' (every element)");
          continue;
        }
        // Every element through one check: in range for the dtype, and inf,
        // -inf and nan written as strings.
        auto store = [&](int64_t i, const json &v, const std::string &vp) {
          std::optional<double> x = json_number(v);
          if (!x) {
            schema(vp, "expected a number, true/false, or \"inf\", \"-inf\", \"nan\"; got " + v.dump());
            return false;
          }
          if (std::string why = not_representable(*x, *dtype); !why.empty()) {
            diags_.error(ErrorCode::DTypeMismatch, file_, vp, why);
            return false;
          }
          if (v.is_number_integer())
            t.set_i64(i, v.get<int64_t>()); // exact for large i64
          else
            t.set_f64(i, *x);
          return true;
        };
        if (def.contains("value")) {
          if (t.numel() > 0 ? !store(0, def["value"], p + "/value") : !json_number(def["value"]))
            continue;
          for (int64_t i = 1; i < t.numel(); ++i)
            if (is_float(*dtype))
              t.set_f64(i, t.get_f64(0));
            else
              t.set_i64(i, t.get_i64(0));
        } else {
          const json &values = def["values"];
          if (!values.is_array() || static_cast<int64_t>(values.size()) != t.numel()) {
            schema(p + "/values", "expected a list of " + std::to_string(t.numel()) + " numbers (row-major)");
            continue;
          }
          bool ok = true;
          for (size_t i = 0; i < values.size() && ok; ++i)
            ok = store(static_cast<int64_t>(i), values[i], p + "/values/" + std::to_string(i));
          if (!ok)
            continue;
        }
        ast.constants.emplace(name, t);
      } catch (const Error &e) {
        diags_.error(e.code(), file_, e.location().empty() ? p : e.location(), e.message());
      }
    }
  }

  void parse_module(const std::string &name, const json &def, const std::string &p, ModelAst &ast) {
    Module m;
    m.name = name;
    m.pointer = p;
    if (!is_identifier(name))
      schema(p, "module name '" + name + "' must be an identifier");
    if (!def.is_object()) {
      schema(p, std::string("a module must be an object with args, body and return, got ") + json_kind(def));
      return;
    }
    check_keys(def, p, {"args", "body", "return", "options", "params", "subgraph", "description"});
    if (def.contains("args")) {
      const json &args = def["args"];
      if (!args.is_array())
        schema(p + "/args", "expected a list of argument names");
      else
        for (size_t i = 0; i < args.size(); ++i) {
          if (!args[i].is_string() || !is_value_name(args[i].get<std::string>()))
            schema(p + "/args/" + std::to_string(i), "expected a value name, got " + args[i].dump());
          else
            m.args.push_back(args[i].get<std::string>());
        }
    }
    if (def.contains("options")) {
      if (!def["options"].is_object())
        schema(p + "/options", "expected an object of option defaults");
      else
        for (const auto &[opt, value] : def["options"].items()) {
          if (!is_identifier(opt))
            schema(p + "/options/" + pointer_escape(opt), "option name '" + opt + "' must be an identifier");
          m.options[opt] = value;
        }
    }
    if (def.contains("params")) {
      if (!def["params"].is_object())
        schema(p + "/params", "expected an object: param name → shape or {\"shape\", \"dtype\", \"init\"}");
      else
        for (const auto &[param, decl] : def["params"].items())
          parse_param(param, decl, p + "/params/" + pointer_escape(param), m);
    }
    if (def.contains("subgraph")) {
      const json &s = def["subgraph"];
      if (s.is_boolean())
        m.subgraph = s.get<bool>();
      else if (s.is_string() && !s.get<std::string>().empty()) {
        m.subgraph = true;
        m.subgraph_key = s.get<std::string>();
      } else
        schema(p + "/subgraph", "expected true/false or a subgraph key string");
    }
    if (!def.contains("body"))
      schema(p, "missing field 'body'");
    else
      parse_body(def["body"], p + "/body", m);
    m.returns_pointer = p + "/return";
    if (!def.contains("return"))
      schema(p, "missing field 'return'");
    else if (def["return"].is_string())
      m.returns.push_back(def["return"].get<std::string>());
    else if (def["return"].is_array() && !def["return"].empty()) {
      for (size_t i = 0; i < def["return"].size(); ++i) {
        if (!def["return"][i].is_string())
          schema(p + "/return/" + std::to_string(i), "expected a value name");
        else
          m.returns.push_back(def["return"][i].get<std::string>());
      }
    } else
      schema(p + "/return", "expected a value name or a non-empty list of names");
    ast.modules.emplace(name, std::move(m));
  }

  void parse_param(const std::string &name, const json &decl, const std::string &p, Module &m) {
    ParamDecl d;
    d.pointer = p;
    if (decl.is_array())
      d.shape = decl;
    else if (decl.is_object()) {
      check_keys(decl, p, {"shape", "dtype", "init"});
      if (!decl.contains("shape") || !decl["shape"].is_array())
        schema(p, "a param declaration needs a 'shape' list");
      else
        d.shape = decl["shape"];
      if (decl.contains("dtype"))
        if (auto dt = dtype_of(decl["dtype"], p + "/dtype"))
          d.dtype = *dt;
      if (decl.contains("init")) {
        std::string init = decl["init"].is_string() ? decl["init"].get<std::string>() : "";
        bool ok = init == "normal" || init == "uniform" || init == "ones" || init == "zeros" ||
                  (init.rfind("normal:", 0) == 0 && init.size() > 7);
        if (!ok)
          schema(p + "/init", "unknown init " + decl["init"].dump() +
                                  " (expected \"normal\", \"uniform\", \"ones\", \"zeros\" or \"normal:S\")");
        else
          d.init = init;
      }
    } else {
      schema(p, std::string("expected a shape list or {\"shape\", \"dtype\", \"init\"}, got ") + json_kind(decl));
      return;
    }
    m.params[name] = d;
  }

  void parse_body(const json &body, const std::string &p, Module &m) {
    if (!body.is_array()) {
      schema(p, std::string("expected a list of statements, got ") + json_kind(body));
      return;
    }
    for (size_t i = 0; i < body.size(); ++i)
      if (auto s = parse_statement(body[i], p + "/" + std::to_string(i)))
        m.body.push_back(std::move(*s));
  }

  std::optional<Statement> parse_statement(const json &stmt, const std::string &p) {
    if (!stmt.is_object() || stmt.size() != 1) {
      schema(p, "a statement is a one-key object: {\"result\": [\"op\", operands..., {attributes}]}");
      return std::nullopt;
    }
    Statement s;
    s.pointer = p;
    const std::string &key = stmt.begin().key();
    const json &value = stmt.begin().value();
    std::string kp = p + "/" + pointer_escape(key);
    // Results: "a" or "a,b,c".
    size_t start = 0;
    while (start <= key.size()) {
      size_t comma = key.find(',', start);
      if (comma == std::string::npos)
        comma = key.size();
      std::string r = key.substr(start, comma - start);
      r.erase(0, r.find_first_not_of(' '));
      r.erase(r.find_last_not_of(' ') + 1);
      if (!is_value_name(r))
        schema(p, "result name '" + r + "' is not a valid value name (letters, digits, '_', '.', '-')");
      s.results.push_back(r);
      start = comma + 1;
    }
    // From here on a broken statement is kept with an empty op, so its
    // results still count as defined and later uses do not cascade.
    if (!value.is_array() || value.empty() || !value[0].is_string()) {
      schema(kp, "expected [\"op\", operands..., {attributes}]");
      return s;
    }
    s.op = value[0].get<std::string>();
    size_t end = value.size();
    s.key_pointer = kp;
    if (end > 1 && value[end - 1].is_object()) {
      s.attrs = value[end - 1];
      s.attrs_pointer = kp + "/" + std::to_string(end - 1);
      --end;
    }
    size_t first_operand = 1;
    if (s.op == "call" || s.op == "repeat") {
      if (end < 2 || !value[1].is_string()) {
        schema(kp + "/1", "expected the module name after \"" + s.op + "\"");
        s.op.clear();
        return s;
      }
      s.callee = value[1].get<std::string>();
      first_operand = 2;
    } else if (!OpRegistry::instance().find(s.op)) {
      try {
        OpRegistry::instance().get(s.op); // throws with a suggestion
      } catch (const Error &e) {
        diags_.error(e.code(), file_, kp + "/0", e.message());
      }
      s.op.clear();
      return s;
    } else {
      // Attribute names can be checked now; values may depend on options.
      const OpDef &def = OpRegistry::instance().get(s.op);
      for (const auto &[name, v] : s.attrs.items()) {
        const std::string &attr = name; // lambdas cannot capture structured bindings in C++17
        bool known = std::any_of(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec &a) { return a.name == attr; });
        if (!known) {
          std::string list;
          for (const AttrSpec &a : def.attrs)
            list += (list.empty() ? "" : ", ") + a.name;
          diags_.error(ErrorCode::UnknownAttribute, file_, kp + "/" + std::to_string(value.size() - 1) + "/" + pointer_escape(name),
                       s.op + ": unknown attribute '" + name + "' (" +
                           (list.empty() ? "this op takes no attributes" : "expected one of: " + list) + ")");
        }
      }
    }
    for (size_t i = first_operand; i < end; ++i) {
      std::string op_p = kp + "/" + std::to_string(i);
      const json &v = value[i];
      Operand o;
      o.pointer = op_p;
      if (v.is_number()) {
        o.kind = Operand::Kind::number;
        o.number = v.get<double>();
      } else if (v.is_boolean()) {
        o.kind = Operand::Kind::number;
        o.number = v.get<bool>();
      } else if (v.is_string()) {
        std::string text = v.get<std::string>();
        if (!text.empty() && text[0] == '@') {
          o.kind = Operand::Kind::param;
          o.name = text.substr(1);
          if (o.name.empty())
            schema(op_p, "'@' must be followed by a parameter name");
        } else if (!text.empty() && text[0] == '#') {
          o.kind = Operand::Kind::constant;
          o.name = text.substr(1);
        } else {
          o.name = text;
        }
      } else {
        schema(op_p, std::string("an operand must be a value name, \"@param\", \"#constant\" or a number, got ") + json_kind(v));
        continue;
      }
      s.operands.push_back(o);
    }
    return s;
  }

  void parse_outputs(const json &root, ModelAst &ast) {
    if (!root.contains("outputs")) {
      schema("", "missing field 'outputs'");
      return;
    }
    const json &outputs = root["outputs"];
    if (!outputs.is_array() || outputs.empty()) {
      schema("/outputs", "expected a non-empty list of output value names");
      return;
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string p = "/outputs/" + std::to_string(i);
      OutputDecl o;
      o.pointer = p;
      if (outputs[i].is_string()) {
        o.name = o.value = outputs[i].get<std::string>();
      } else if (outputs[i].is_object()) {
        check_keys(outputs[i], p, {"name", "value"});
        o.name = required_string(outputs[i], p, "name");
        o.value = required_string(outputs[i], p, "value");
      } else {
        schema(p, "expected a value name or {\"name\", \"value\"}");
        continue;
      }
      if (!o.name.empty() && !is_identifier(o.name))
        schema(p, "output name '" + o.name + "' must be an identifier: it names generated C symbols");
      if (!seen.insert(o.name).second)
        schema(p, "output '" + o.name + "' is listed twice");
      ast.outputs.push_back(o);
    }
  }

  // Names must be defined before use; modules and constants must exist;
  // call arity must match.
  void check_scopes(const Module &m, const ModelAst &ast) {
    std::set<std::string> defined(m.args.begin(), m.args.end());
    for (const Statement &s : m.body) {
      for (const Operand &o : s.operands) {
        if (o.kind == Operand::Kind::value && !defined.count(o.name))
          diags_.error(ErrorCode::UndefinedName, file_, o.pointer,
                       "'" + o.name + "' is not defined here" + (m.name == "main" ? "" : " (in module " + m.name + ")"));
        if (o.kind == Operand::Kind::constant && !ast.constants.count(o.name))
          diags_.error(ErrorCode::UndefinedName, file_, o.pointer, "no constant named '" + o.name + "' in /constants");
      }
      if (s.op == "call" || s.op == "repeat") {
        auto it = ast.modules.find(s.callee);
        std::string cp = s.key_pointer + "/1";
        if (it == ast.modules.end()) {
          diags_.error(ErrorCode::UndefinedName, file_, cp, "no module named '" + s.callee + "'");
        } else {
          const Module &callee = it->second;
          if (callee.args.size() != s.operands.size())
            diags_.error(ErrorCode::ModelSchema, file_, cp,
                         "module " + s.callee + " takes " + std::to_string(callee.args.size()) + " argument(s), " +
                             std::to_string(s.operands.size()) + " given");
          if (s.op == "repeat" && callee.returns.size() > callee.args.size())
            diags_.error(ErrorCode::ModelSchema, file_, cp,
                         "repeat feeds a module's results to its first arguments (the rest are passed unchanged to "
                         "every iteration), so it cannot return more values than it takes: " +
                             s.callee + " takes " + std::to_string(callee.args.size()) + " and returns " +
                             std::to_string(callee.returns.size()));
          size_t results = callee.returns.size();
          if (results != s.results.size())
            diags_.error(ErrorCode::ModelSchema, file_, s.pointer,
                         "statement names " + std::to_string(s.results.size()) + " result(s), module " + s.callee +
                             " returns " + std::to_string(results));
          check_call_attrs(s, callee);
        }
      }
      for (const std::string &r : s.results)
        defined.insert(r);
    }
    if (m.name == "main") {
      for (const OutputDecl &o : ast.outputs)
        if (!o.value.empty() && !defined.count(o.value))
          diags_.error(ErrorCode::UndefinedName, file_, o.pointer, "output '" + o.value + "' is not defined in /main");
    } else {
      for (size_t i = 0; i < m.returns.size(); ++i)
        if (!defined.count(m.returns[i]))
          diags_.error(ErrorCode::UndefinedName, file_, m.returns_pointer,
                       "returned value '" + m.returns[i] + "' is not defined in module " + m.name);
    }
  }

  void check_call_attrs(const Statement &s, const Module &callee) {
    for (const auto &[key, value] : s.attrs.items()) {
      std::string p = s.attrs_pointer + "/" + pointer_escape(key);
      if (key == "instance") {
        if (!value.is_string())
          schema(p, "'instance' must be a string (the name prefix of this call's parameters)");
      } else if (s.op == "repeat" && key == "times") {
        if (!(value.is_number_integer() && value.get<int64_t>() >= 0) && !(value.is_string() && value.get<std::string>().rfind("$", 0) == 0))
          schema(p, "'times' must be a non-negative integer");
      } else if (s.op == "repeat" && key == "prefix") {
        if (!value.is_string())
          schema(p, "'prefix' must be a string such as \"h.{i}\"");
      } else if (!callee.options.count(key)) {
        std::string list;
        for (const auto &[opt, v] : callee.options)
          list += (list.empty() ? "" : ", ") + opt;
        diags_.error(ErrorCode::UnknownOption, file_, p,
                     "module " + callee.name + " has no option '" + key + "'" +
                         (list.empty() ? "" : " (options: " + list + ")"));
      }
    }
    if (s.op == "repeat" && !s.attrs.contains("times"))
      schema(s.key_pointer, "repeat needs 'times'");
  }

  static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }
  static uint64_t sat_mul(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

  // Statements one execution of `s` costs the tracer, from the costs of the
  // modules it calls (done ones only: a cycle is reported elsewhere). A lower
  // bound: "$opt" repeat counts count as 1, and a keyed subgraph's body is
  // traced once whatever the count.
  uint64_t statement_cost(const Statement &s, const std::map<const Module *, uint64_t> &cost,
                          std::map<const Module *, int> &state) const {
    uint64_t n = 1;
    if (s.op != "call" && s.op != "repeat")
      return n;
    auto it = ast_modules_->find(s.callee);
    if (it == ast_modules_->end() || state[&it->second] != 2)
      return n;
    uint64_t body = cost.at(&it->second), times = 1;
    if (s.op == "repeat" && s.attrs.contains("times") && s.attrs["times"].is_number_unsigned())
      times = s.attrs["times"].get<uint64_t>();
    if (!it->second.subgraph_key.empty())
      times = std::min<uint64_t>(times, 1);
    return sat_add(n, sat_mul(times, body));
  }
  uint64_t statement_cost(const Module &m, const std::map<const Module *, uint64_t> &cost,
                          std::map<const Module *, int> &state) const {
    uint64_t total = 0;
    for (const Statement &s : m.body)
      total = sat_add(total, statement_cost(s, cost, state));
    return total;
  }

  // Cycles among module calls, and how deep calls nest: an iterative DFS (a
  // long chain of modules must not overflow this stack), then the longest
  // chain from main against kMaxModuleDepth (it bounds the tracer's
  // recursion).
  void check_calls(const ModelAst &ast) {
    ast_modules_ = &ast.modules;
    auto callee_of = [&](const Statement &s) -> const Module * {
      if (s.op != "call" && s.op != "repeat")
        return nullptr;
      auto it = ast.modules.find(s.callee);
      return it == ast.modules.end() ? nullptr : &it->second;
    };
    // 0 = unvisited, 1 = on the DFS stack, 2 = done.
    std::map<const Module *, int> state;
    std::map<const Module *, size_t> height; // call levels below a module (0: it calls nothing)
    std::map<const Module *, uint64_t> cost; // statements one call of it executes (a lower bound)
    struct Item {
      const Module *module;
      size_t next; // the next statement to look at
    };
    std::vector<Item> stack;
    bool cycles = false;
    auto visit = [&](const Module &root) {
      state[&root] = 1;
      stack.push_back({&root, 0});
      while (!stack.empty()) {
        if (stack.back().next == stack.back().module->body.size()) {
          const Module *m = stack.back().module;
          size_t h = 0;
          for (const Statement &s : m->body)
            if (const Module *c = callee_of(s); c && state[c] == 2)
              h = std::max(h, height[c] + 1);
          height[m] = h;
          cost[m] = statement_cost(*m, cost, state);
          state[m] = 2;
          stack.pop_back();
          continue;
        }
        const Statement &s = stack.back().module->body[stack.back().next++];
        const Module *c = callee_of(s);
        if (!c)
          continue;
        if (state[c] == 1) {
          std::string cycle;
          auto from = std::find_if(stack.begin(), stack.end(), [&](const Item &i) { return i.module == c; });
          for (auto i = from; i != stack.end(); ++i)
            cycle += i->module->name + " → ";
          diags_.error(ErrorCode::ModuleCycle, file_, s.pointer, "modules call each other in a cycle: " + cycle + c->name);
          cycles = true;
        } else if (state[c] == 0) {
          state[c] = 1;
          stack.push_back({c, 0});
        }
      }
    };
    for (const auto &[name, m] : ast.modules)
      if (state[&m] == 0)
        visit(m);
    visit(ast.main);
    if (cycles)
      return;
    // Repeats multiply: refuse before tracing what the tracer would only
    // stop after max_statements (seconds and gigabytes later).
    if (cost[&ast.main] > max_statements_) {
      uint64_t so_far = 0;
      for (const Statement &s : ast.main.body) {
        so_far = sat_add(so_far, statement_cost(s, cost, state));
        if (so_far > max_statements_) {
          diags_.error(ErrorCode::ModelSchema, file_, s.pointer,
                       "tracing the model would execute more than " + std::to_string(max_statements_) +
                           " statements (at least " + std::to_string(cost[&ast.main]) +
                           ": repeats and calls multiply; check repeat counts)");
          break;
        }
      }
      return;
    }
    if (height[&ast.main] <= kMaxModuleDepth)
      return;
    // Follow the deepest chain from main to the call one level too deep.
    std::vector<std::string> chain{"main"};
    const Module *m = &ast.main;
    const Statement *at = nullptr;
    for (size_t level = 0; level <= kMaxModuleDepth; ++level) {
      for (const Statement &s : m->body)
        if (const Module *c = callee_of(s); c && height[c] + 1 == height[m]) {
          at = &s;
          m = c;
          break;
        }
      chain.push_back(m->name);
    }
    std::string shown;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (i == 3 && chain.size() > 6) {
        shown += " → …";
        i = chain.size() - 3;
      }
      shown += (i ? " → " : "") + chain[i];
    }
    diags_.error(ErrorCode::ModuleDepth, file_, at->pointer,
                 "module calls nest " + std::to_string(height[&ast.main]) + " levels deep, more than the limit of " +
                     std::to_string(kMaxModuleDepth) + " (" + shown + ")");
  }

  const std::string &file_;
  DiagnosticEngine &diags_;
  uint64_t max_statements_ = UINT64_MAX;
  const std::map<std::string, Module> *ast_modules_ = nullptr;
};

} // namespace

std::optional<ModelAst> parse_model(const std::string &text, const std::string &file, DiagnosticEngine &diagnostics,
                                    uint64_t max_statements) {
  return Parser(file, diagnostics, max_statements).parse(text);
}

} // namespace maxc::frontend
