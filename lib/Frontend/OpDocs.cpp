// docs/ops.md from the registry. Operand names and the shapes used to probe
// each op live here (the registry knows counts, attributes and verifiers,
// not names); every dtype statement is measured by running the op's
// verifier on each dtype. A test keeps docs/ops.md equal to ops_markdown()
// and requires a signature for every registered op.
#include "maxc/Frontend/OpDocs.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <map>
#include <sstream>
#include <vector>

namespace maxc {

namespace {

// One operand: its name, its shape in the signature, the dtype variable
// ("T", "I" for an index-like operand, or a fixed dtype: "bool", "u8"), a
// concrete shape to probe the verifier with, and whether it is optional
// (trailing) or repeated (variadic).
struct OperandDoc {
  std::string name, shape, var, probe;
  bool optional = false, variadic = false;
};

struct OpDoc {
  std::vector<OperandDoc> operands;
  std::string result;                                      // shape text of the result(s)
  std::vector<std::pair<std::string, AttrValue>> probe_attrs; // required attributes, for probing
};

Shape probe_shape(const std::string &text) {
  Shape s;
  std::string body = text.substr(1, text.size() - 2);
  std::stringstream in(body);
  std::string item;
  while (std::getline(in, item, ','))
    s.emplace_back(static_cast<int64_t>(std::stoll(item)));
  return s;
}

const std::map<std::string, OpDoc> &docs() {
  static const std::map<std::string, OpDoc> table = [] {
    std::map<std::string, OpDoc> t;
    auto x = [](const char *name = "x", const char *shape = "[...]", const char *probe = "[2,3]") {
      return OperandDoc{name, shape, "T", probe};
    };
    for (const char *op : {"abs", "ceil", "cos", "erf", "exp", "floor", "gelu", "log", "neg", "not", "relu", "round",
                           "rsqrt", "sigmoid", "sign", "silu", "sin", "sqrt", "tanh"})
      t[op] = {{x()}, "[...]", {}};
    for (const char *op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod", "eq", "ne", "lt", "le", "gt",
                           "ge", "and", "or"})
      t[op] = {{x("a", "[...]", "[2,3]"), x("b", "[...]", "[3]")}, "[broadcast(a, b)]", {}};
    t["where"] = {{OperandDoc{"cond", "[...]", "bool", "[2,3]"}, x("a", "[...]", "[2,3]"), x("b", "[...]", "[3]")},
                  "[broadcast(cond, a, b)]", {}};
    t["cast"] = {{x()}, "[...]", {{"dtype", DType::f32}}};
    for (const char *op : {"argmax", "argmin", "softmax", "log_softmax"})
      t[op] = {{x()}, std::string(op).find("arg") == 0 ? "[... without axis]" : "[...]", {}};
    for (const char *op : {"max", "min", "mean", "prod", "sum"})
      t[op] = {{x()}, "[... without axes]", {}};
    t["layer_norm"] = {{x("x", "[..., N]", "[2,4]"), x("weight", "[N]", "[4]"),
                        OperandDoc{"bias", "[N]", "T", "[4]", true}},
                       "[..., N]", {}};
    t["rms_norm"] = {{x("x", "[..., N]", "[2,4]"), x("weight", "[N]", "[4]")}, "[..., N]", {}};
    t["batch_norm"] = {{x("x", "[B, C, ...]", "[1,2,3]"), x("scale", "[C]", "[2]"), x("bias", "[C]", "[2]"),
                        x("mean", "[C]", "[2]"), x("var", "[C]", "[2]")},
                       "[B, C, ...]", {}};
    t["matmul"] = {{x("a", "[..., M, K]", "[2,3]"), x("b", "[..., K, N]", "[3,4]")}, "[..., M, N]", {}};
    t["matmul_nbits"] = {{x("a", "[..., K]", "[2,32]"), OperandDoc{"b", "[N, ceil(K/block_size), block_size*bits/8]", "u8", "[3,1,16]"},
                          x("scales", "[N*ceil(K/block_size)]", "[3]"),
                          OperandDoc{"zero_points", "[N*ceil(ceil(K/block_size)*bits/8)]", "u8", "[3]", true}},
                         "[..., N]", {{"K", int64_t(32)}, {"N", int64_t(3)}}};
    t["attention"] = {{x("q", "[..., M, D]", "[2,3,4]"), x("k", "[..., S, D]", "[2,5,4]"), x("v", "[..., S, E]", "[2,5,3]"),
                       OperandDoc{"mask", "[..., M, S]", "T", "[3,5]", true}},
                      "[..., M, E]", {}};
    t["recurrence"] = {{x("proj", "[S, B, G*H]", "[2,1,16]"), x("r", "[G*H/K, H, K]", "[4,4,4]"), x("h0", "[B, H]", "[1,4]"),
                        OperandDoc{"c0", "[B, H]", "T", "[1,4]", true}, OperandDoc{"p", "[3H]", "T", "[12]", true},
                        OperandDoc{"lens", "[B]", "I", "[1]", true}},
                       "[S, B, H] (Y), T[B, H] (Y_h; lstm: Y_c too)",
                       {{"cell", std::string("lstm")}, {"peephole", true}, {"masked", true}}};
    t["linear"] = {{x("x", "[..., IN]", "[2,3]"), x("weight", "[OUT, IN]", "[4,3]"),
                    OperandDoc{"bias", "[OUT]", "T", "[4]", true}},
                   "[..., OUT]", {}};
    t["conv2d"] = {{x("x", "[N, C, H, W]", "[1,2,5,5]"), x("weight", "[O, C/groups, kh, kw]", "[3,2,3,3]"),
                    OperandDoc{"bias", "[O]", "T", "[3]", true}},
                   "[N, O, H', W']", {}};
    t["conv_transpose2d"] = {{x("x", "[N, C, H, W]", "[1,2,5,5]"), x("weight", "[C, O/groups, kh, kw]", "[2,3,3,3]"),
                              OperandDoc{"bias", "[O]", "T", "[3]", true}},
                             "[N, O, H', W']", {}};
    for (const char *op : {"avg_pool2d", "max_pool2d"})
      t[op] = {{x("x", "[N, C, H, W]", "[1,2,4,4]")}, "[N, C, H', W']", {{"kernel", std::vector<int64_t>{2, 2}}}};
    t["global_avg_pool2d"] = {{x("x", "[N, C, H, W]", "[1,2,4,4]")}, "[N, C, 1, 1]", {}};
    t["embedding"] = {{x("table", "[V, D]", "[5,3]"), OperandDoc{"ids", "[...]", "I", "[2]"}}, "[..., D]", {}};
    t["gather"] = {{x("x", "[..., n, ...]", "[4,3]"), OperandDoc{"indices", "[J...]", "I", "[2]"}},
                   "[..., J..., ...]", {}};
    t["concat"] = {{OperandDoc{"xs", "[...]", "T", "[2,3]", false, true}}, "[... joined along axis]", {}};
    t["split"] = {{x("x", "[...]", "[4,3]")}, "one [...] per piece", {{"sizes", std::vector<int64_t>{1, 3}}}};
    t["slice"] = {{x()}, "[...]", {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{1}}}};
    t["pad"] = {{x()}, "[...]", {{"pads", std::vector<int64_t>{1, 1, 0, 0}}}};
    t["tile"] = {{x()}, "[...]", {{"repeats", std::vector<int64_t>{1, 2}}}};
    t["transpose"] = {{x()}, "[permuted]", {}};
    t["unsqueeze"] = {{x()}, "[...]", {{"axes", std::vector<int64_t>{0}}}};
    t["squeeze"] = {{x("x", "[...]", "[1,3]")}, "[...]", {}};
    t["reshape"] = {{x()}, "[shape]", {{"shape", Shape{6}}}};
    t["broadcast_to"] = {{x("x", "[...]", "[1,3]")}, "[shape]", {{"shape", Shape{2, 3}}}};
    t["full"] = {{}, "dtype[shape]", {}};
    t["iota"] = {{}, "dtype[shape]", {}};
    t["range"] = {{}, "dtype[n]", {}};
    t["dim_values"] = {{}, "dtype[len(dims)] or dtype[]", {{"dims", Shape{2, 3}}}};
    t["constant"] = {{}, "the constant's type", {}};
    t["call"] = {{OperandDoc{"args", "[...]", "any", "", false, true}}, "the callee's results", {}};
    t["if"] = {{OperandDoc{"pred", "[]", "any", ""}, OperandDoc{"captures", "[...]", "any", "", false, true}},
               "the taken body's results", {}};
    t["loop"] = {{OperandDoc{"trip", "[]", "I", ""}, OperandDoc{"cond", "[]", "any", ""},
                  OperandDoc{"carried_and_captures", "[...]", "any", "", false, true}},
                 "the last carried values", {}};
    t["bind_dim"] = {{OperandDoc{"value", "[]", "I", "[]"}}, "[]", {{"symbol", std::string("n")}, {"bound", int64_t(16)}}};
    t["buffer_prefix"] = {{OperandDoc{"buffer", "[capacity, ...]", "T", "[4,3]"}}, "[length, ...]",
                          {{"length", Shape{2}}}};
    t["buffer_append"] = {{OperandDoc{"buffer", "[capacity, ...]", "T", "[4,3]"}, OperandDoc{"rows", "[n, ...]", "T", "[1,3]"}},
                          "[offset + n, ...]", {{"offset", Shape{2}}}};
    t["allreduce_sum"] = {{OperandDoc{"shards", "[...]", "T", "", false, true}}, "one [...] per shard", {}};
    t["top_k"] = {{OperandDoc{"x", "[..., n]", "T", "[2,5]"}}, "[..., k], i64[..., k]", {{"k", Shape{2}}}};
    t["all_reduce"] = {{OperandDoc{"x", "[...]", "T", "[2,3]"}}, "[...]", {{"world", int64_t(2)}}};
    t["all_gather"] = {{OperandDoc{"x", "[..., d, ...]", "T", "[2,3]"}}, "[..., world * d, ...]",
                       {{"world", int64_t(2)}, {"axis", int64_t(1)}}};
    return t;
  }();
  return table;
}

// The dtypes a variable accepts, by asking the op's verifier: every operand
// of that variable gets the dtype, the others their first accepted dtype.
std::vector<DType> accepted(const OpDef &def, const OpDoc &doc, const std::string &var,
                            const std::map<std::string, DType> &fixed) {
  std::vector<DType> out;
  Attrs attrs;
  for (const auto &[name, value] : doc.probe_attrs)
    attrs.set(name, value);
  for (DType d : kAllDTypes) {
    std::vector<TensorType> operands;
    for (const OperandDoc &o : doc.operands) {
      DType dt = o.var == var ? d : o.var == "bool" ? DType::boolean : o.var == "u8" ? DType::u8 : fixed.count(o.var) ? fixed.at(o.var) : DType::i64;
      operands.emplace_back(dt, probe_shape(o.probe));
    }
    try {
      infer_result_types(def, operands, normalize_attrs(def, attrs), nullptr);
      out.push_back(d);
    } catch (const Error &) {
    }
  }
  return out;
}

std::string dtype_list(const std::vector<DType> &ds) {
  std::string s;
  for (DType d : ds)
    s += (s.empty() ? "" : " ") + std::string(dtype_name(d));
  return s;
}

struct Signature {
  std::string call;                           // "embedding(table: T[V, D], ids: I[...]) -> T[..., D]"
  std::vector<std::pair<std::string, std::string>> vars; // ("T", "f16 bf16 ...")
};

Signature signature(const OpDef &def, const OpDoc &doc) {
  Signature sig;
  bool probe = !doc.operands.empty() && !doc.operands[0].probe.empty();
  std::map<std::string, DType> fixed;
  std::string result_dtype;
  if (probe) {
    for (const char *var : {"T", "I"}) {
      bool used = false;
      for (const OperandDoc &o : doc.operands)
        used = used || o.var == var;
      if (!used)
        continue;
      std::vector<DType> ds = accepted(def, doc, var, fixed);
      if (ds.empty())
        throw Error(ErrorCode::Internal, "ops.md: the verifier of '" + def.name + "' accepts no dtype for " + var);
      fixed[var] = ds.front();
      sig.vars.emplace_back(var, ds.size() == std::size(kAllDTypes) ? "any dtype" : dtype_list(ds));
    }
    // The result dtype: T when it follows T, else what the verifier says.
    std::vector<TensorType> operands;
    for (const OperandDoc &o : doc.operands)
      operands.emplace_back(o.var == "bool" ? DType::boolean : o.var == "u8" ? DType::u8 : fixed.count(o.var) ? fixed[o.var] : DType::i64,
                            probe_shape(o.probe));
    Attrs attrs;
    for (const auto &[name, value] : doc.probe_attrs)
      attrs.set(name, value);
    DType first = infer_result_types(def, operands, normalize_attrs(def, attrs), nullptr).at(0).dtype;
    bool follows = false;
    if (fixed.count("T") && first == fixed["T"]) {
      // Check with a second T dtype, if there is one.
      std::vector<DType> ds = accepted(def, doc, "T", fixed);
      follows = true;
      if (ds.size() > 1) {
        std::vector<TensorType> ops2;
        for (const OperandDoc &o : doc.operands)
          ops2.emplace_back(o.var == "T" ? ds[1] : o.var == "bool" ? DType::boolean : o.var == "u8" ? DType::u8 : fixed.count(o.var) ? fixed[o.var] : DType::i64,
                            probe_shape(o.probe));
        follows = infer_result_types(def, ops2, normalize_attrs(def, attrs), nullptr).at(0).dtype == ds[1];
      }
    }
    result_dtype = follows ? "T" : std::string(dtype_name(first));
    if (def.name == "cast")
      result_dtype = "dtype";
  } else if (!doc.operands.empty()) {
    sig.vars.emplace_back(doc.operands[0].var == "any" ? "" : "T", doc.operands[0].var == "any" ? "" : "any dtype");
  }
  std::string args;
  for (const OperandDoc &o : doc.operands) {
    std::string a = o.name + ": " + (o.var == "any" ? "" : o.var) + o.shape;
    if (o.variadic)
      a += "...";
    if (o.optional)
      a = "[" + a + "]";
    args += (args.empty() ? "" : ", ") + a;
  }
  sig.call = def.name + "(" + args + ") -> " + result_dtype + doc.result;
  if (!sig.vars.empty() && sig.vars.back().first.empty())
    sig.vars.pop_back();
  return sig;
}

std::string vars_text(const Signature &sig) {
  std::string s;
  for (const auto &[var, list] : sig.vars)
    s += (s.empty() ? "" : "; ") + var + ": " + list;
  return s;
}

} // namespace

std::string op_signature(const std::string &op) {
  auto it = docs().find(op);
  const OpDef *def = OpRegistry::instance().find(op);
  if (it == docs().end() || !def)
    return "";
  Signature sig = signature(*def, it->second);
  std::string vars = vars_text(sig);
  return sig.call + (vars.empty() ? "" : "   " + vars);
}

std::string ops_markdown() {
  std::string out =
      "# maxc ops\n\n"
      "<!-- Generated from the op registry by ops_markdown() (lib/Frontend/OpDocs.cpp); do not edit.\n"
      "     Regenerate: MAXC_UPDATE_DOCS=1 build/test/maxc-unit-tests \"[docs]\" -->\n\n"
      "Every op a model can use, as `[\"op\", operands..., {attributes}]` in a statement\n"
      "(see [model-format.md](model-format.md)); `maxc ops` prints the same signatures.\n"
      "Operands are listed in order; `[name: ...]` is optional, `name: ...` with `...` after\n"
      "the shape takes any number of operands. `T` and `I` are dtype variables: every operand\n"
      "marked `T` has the same dtype, one of those listed (measured by the op's verifier);\n"
      "`I` is an index dtype. Shapes: `[...]` any shape; binary ops broadcast NumPy-style.\n\n"
      "## Out-of-range indices (`gather`, `embedding`)\n\n"
      "Indices in `[-n, n)` select as in ONNX Gather: a negative index counts from the end\n"
      "(`-1` is the last entry). Any index still out of range after that one wrap is\n"
      "clamped to `[0, n-1]` (so `n + 5` reads the last entry and `-n - 5` the first). The\n"
      "reference interpreter, compiled CPU code and GPU kernels (`--device amdgpu-emu`) all\n"
      "do this; it is never an error and never reads out of bounds. Gathering from an axis\n"
      "of size 0 has nothing to select: every element of the result is 0 (on every device;\n"
      "the operand is never read).\n\n"
      "## Ops\n\n";
  for (const OpDef *def : OpRegistry::instance().all()) {
    out += "### " + def->name + "\n\n" + def->summary + "\n\n";
    auto it = docs().find(def->name);
    if (it != docs().end()) {
      Signature sig = signature(*def, it->second);
      out += "    " + sig.call + "\n\n";
      std::string vars = vars_text(sig);
      if (!vars.empty())
        out += "Dtypes: " + vars + ".\n\n";
    }
    out += "Operands: " + std::to_string(def->min_operands) +
           (def->max_operands == def->min_operands ? ""
            : def->max_operands < 0                ? " or more"
                                                   : " to " + std::to_string(def->max_operands)) +
           ".\n\n";
    if (!def->attrs.empty()) {
      out += "| attribute | kind | default | meaning |\n|---|---|---|---|\n";
      for (const AttrSpec &a : def->attrs)
        out += "| `" + a.name + "` | " + std::string(attr_kind_name(a.kind)) + " | " +
               (a.default_value ? "`" + attr_to_string(*a.default_value) + "`" : "required") + " | " + a.doc + " |\n";
      out += "\n";
    }
  }
  return out;
}

} // namespace maxc
