#include "maxc/Ops/OpRegistry.h"

#include "Families.h"
#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/Error.h"

#include <algorithm>

namespace maxc {

std::vector<TensorType> infer_node(const std::string &op, const std::vector<TensorType> &operands, Attrs &attrs,
                                   const Graph *graph) {
  const OpDef &def = OpRegistry::instance().get(op);
  attrs = normalize_attrs(def, attrs);
  return infer_result_types(def, operands, attrs, graph);
}

const OpRegistry &OpRegistry::instance() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_creation_ops(r);
    register_reduction_ops(r);
    register_normalization_ops(r);
    register_linalg_ops(r);
    register_convolution_ops(r);
    register_shape_ops(r);
    register_structural_ops(r);
    register_attention_ops(r);
    register_quantized_ops(r);
    register_top_k_ops(r);
    register_recurrence_ops(r);
    register_state_ops(r);
    return r;
  }();
  return registry;
}

const OpDef *OpRegistry::find(const std::string &name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

// Edit distance counting a swap of neighbours as one edit (optimal string
// alignment), for "did you mean" suggestions: "rleu" → "relu".
static size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

const OpDef &OpRegistry::get(const std::string &name) const {
  if (const OpDef *def = find(name))
    return *def;
  std::string best;
  size_t best_distance = 3; // suggest only close matches
  for (const auto &[candidate, def] : ops_) {
    size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  throw Error(ErrorCode::UnknownOp,
              "unknown op '" + name + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)"));
}

std::vector<const OpDef *> OpRegistry::all() const {
  std::vector<const OpDef *> out;
  for (const auto &[name, def] : ops_)
    out.push_back(&def);
  return out;
}

void OpRegistry::add(OpDef def) {
  if (ops_.count(def.name))
    throw Error(ErrorCode::Internal, "op '" + def.name + "' registered twice");
  for (const std::string &body : def.body_attrs)
    if (std::none_of(def.attrs.begin(), def.attrs.end(),
                     [&](const AttrSpec &a) { return a.name == body && a.kind == AttrKind::string; }))
      throw Error(ErrorCode::Internal, "op '" + def.name + "': body attribute '" + body + "' is not a string attribute");
  if (def.traits.has(OpTrait::call) && def.body_attrs.size() != 1)
    throw Error(ErrorCode::Internal, "op '" + def.name + "': a call declares exactly one body attribute");
  if (def.traits.has(OpTrait::branch) && (def.body_attrs.size() != 2 || def.min_operands < 1))
    throw Error(ErrorCode::Internal, "op '" + def.name + "': a branch declares two body attributes and a predicate");
  std::string name = def.name;
  ops_.emplace(std::move(name), std::move(def));
}

// Converts `value` to `kind` where the conversion is lossless and obvious.
static std::optional<AttrValue> coerce(const AttrValue &value, AttrKind kind) {
  AttrKind have = attr_kind_of(value);
  if (have == kind)
    return value;
  switch (kind) {
  case AttrKind::real:
    if (auto *i = std::get_if<int64_t>(&value))
      return static_cast<double>(*i);
    break;
  case AttrKind::integer:
    if (auto *d = std::get_if<double>(&value))
      if (static_cast<double>(static_cast<int64_t>(*d)) == *d)
        return static_cast<int64_t>(*d);
    break;
  case AttrKind::ints:
    if (auto *i = std::get_if<int64_t>(&value))
      return std::vector<int64_t>{*i};
    if (auto *r = std::get_if<std::vector<double>>(&value)) {
      std::vector<int64_t> out;
      for (double d : *r) {
        if (static_cast<double>(static_cast<int64_t>(d)) != d)
          return std::nullopt;
        out.push_back(static_cast<int64_t>(d));
      }
      return out;
    }
    break;
  case AttrKind::reals:
    if (auto *v = std::get_if<std::vector<int64_t>>(&value))
      return std::vector<double>(v->begin(), v->end());
    if (auto *d = std::get_if<double>(&value))
      return std::vector<double>{*d};
    break;
  case AttrKind::dtype:
    if (auto *s = std::get_if<std::string>(&value))
      if (auto d = parse_dtype(*s))
        return *d;
    break;
  case AttrKind::shape:
    if (auto *v = std::get_if<std::vector<int64_t>>(&value))
      return make_shape(*v);
    break;
  default:
    break;
  }
  return std::nullopt;
}

Attrs normalize_attrs(const OpDef &def, const Attrs &attrs) {
  Attrs out;
  for (const auto &[name, value] : attrs.values()) {
    const std::string &attr = name; // lambdas cannot capture structured bindings in C++17
    auto spec = std::find_if(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec &s) { return s.name == attr; });
    if (spec == def.attrs.end()) {
      std::string known;
      for (const AttrSpec &s : def.attrs)
        known += (known.empty() ? "" : ", ") + s.name;
      throw Error(ErrorCode::UnknownAttribute, def.name + ": unknown attribute '" + name + "' (" +
                                                   (known.empty() ? "this op takes no attributes"
                                                                  : "expected one of: " + known) +
                                                   ")");
    }
    auto coerced = coerce(value, spec->kind);
    if (!coerced)
      throw Error(ErrorCode::InvalidAttribute, def.name + ": attribute '" + name + "' must be a " +
                                                   std::string(attr_kind_name(spec->kind)) + ", got " +
                                                   attr_to_string(value));
    out.set(name, *coerced);
  }
  for (const AttrSpec &spec : def.attrs) {
    if (out.has(spec.name))
      continue;
    if (!spec.default_value)
      throw Error(ErrorCode::InvalidAttribute, def.name + ": missing required attribute '" + spec.name + "' (" +
                                                   std::string(attr_kind_name(spec.kind)) + ")");
    out.set(spec.name, *spec.default_value);
  }
  return out;
}

std::vector<TensorType> infer_result_types(const OpDef &def, const std::vector<TensorType> &operands,
                                           const Attrs &normalized_attrs, const Graph *graph) {
  int n = static_cast<int>(operands.size());
  if (n < def.min_operands || (def.max_operands >= 0 && n > def.max_operands)) {
    std::string expected = def.min_operands == def.max_operands ? std::to_string(def.min_operands)
                           : def.max_operands < 0 ? "at least " + std::to_string(def.min_operands)
                                                  : std::to_string(def.min_operands) + " to " +
                                                        std::to_string(def.max_operands);
    throw Error(ErrorCode::OperandCount,
                def.name + ": expected " + expected + " operand(s), got " + std::to_string(n));
  }
  return def.infer(InferContext{operands, normalized_attrs, graph});
}

} // namespace maxc

namespace maxc {

OpTraits op_traits(const std::string &name) {
  const OpDef *def = OpRegistry::instance().find(name);
  return def ? def->traits : OpTraits();
}

bool has_bodies(const std::string &name) {
  const OpDef *def = OpRegistry::instance().find(name);
  return def && def->has_bodies();
}

bool is_call(const Node &node) { return op_traits(node.op).has(OpTrait::call); }

const std::string *call_body_name(const Node &node) {
  const OpDef *def = OpRegistry::instance().find(node.op);
  if (!def || !def->has(OpTrait::call) || !node.attrs.has(def->body_attrs[0])) // add(): a call has one body
    return nullptr;
  return &node.attrs.get_string(def->body_attrs[0]);
}

const Graph *call_body(const Graph &graph, const Node &node) {
  const std::string *name = call_body_name(node);
  return name ? graph.find_subgraph(*name) : nullptr;
}

bool is_branch(const Node &node) { return op_traits(node.op).has(OpTrait::branch); }

bool is_loop(const Node &node) { return op_traits(node.op).has(OpTrait::loop); }

const Graph *loop_body(const Graph &graph, const Node &node) {
  const OpDef *def = OpRegistry::instance().find(node.op);
  if (!def || !def->has(OpTrait::loop) || !node.attrs.has(def->body_attrs[0]))
    return nullptr;
  return graph.find_subgraph(node.attrs.get_string(def->body_attrs[0]));
}

std::array<const Graph *, 2> branch_bodies(const Graph &graph, const Node &node) {
  std::array<const Graph *, 2> out{nullptr, nullptr};
  const OpDef *def = OpRegistry::instance().find(node.op);
  if (!def || !def->has(OpTrait::branch))
    return out;
  for (size_t i = 0; i < 2; ++i)
    if (node.attrs.has(def->body_attrs[i]))
      out[i] = graph.find_subgraph(node.attrs.get_string(def->body_attrs[i]));
  return out;
}

bool defines_symbol(const Node &node) { return op_traits(node.op).has(OpTrait::defines_symbol); }
bool writes_buffer(const Node &node) { return op_traits(node.op).has(OpTrait::writes_buffer); }

bool has_effects(const Graph &graph, const Node &node) {
  if (writes_buffer(node))
    return true;
  // Bodies nest a bounded depth (each is a distinct, earlier-defined graph).
  for (const Graph *body : node_bodies(graph, node))
    for (const Node &n : body->nodes())
      if (has_effects(*body, n))
        return true;
  return false;
}

const std::string &defined_symbol(const Node &node) {
  if (!defines_symbol(node))
    throw Error(ErrorCode::Internal, "op '" + node.op + "' defines no symbol");
  return node.attrs.get_string(kBindDimSymbolAttr);
}

std::string op_traits_text(OpTraits t) {
  static const char *names[] = {"elementwise", "unary",     "binary",   "reduction",  "shape",
                                "generator",   "gemm_like", "epilogue_safe", "device_libm_f64", "device_libm",
                                "indirect",    "window",    "composite", "collective", "structural", "index_result",
                                "rowwise",     "strided",   "call",     "branch",   "defines_symbol", "aliases_operand", "writes_buffer", "loop", "communicates"};
  std::string out;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i)
    if (t.bits() & (1u << i))
      out += (out.empty() ? "" : " ") + std::string(names[i]);
  return out;
}

} // namespace maxc
