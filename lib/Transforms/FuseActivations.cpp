// GELU, SiLU and softmax spelled out by exporters, recognized as the ops
// gelu, silu and softmax (one elementwise function, or one row kernel, in
// every backend). Patterns on the rewrite driver (Rewrite.h), listed in
// Canonicalize.cpp after the algebraic rules.
//
// Products are read as a whole: a chain of mul nodes (and divisions by a
// scalar constant), each read only by the next, is a list of factors and one
// constant (the product of its scalar factors), so every association and
// operand order of `x * 0.5 * (...)` is one match. Constants match within
// constant_tolerance(dtype) (relative; FuseActivations.h).
//
// GELU, erf form (torch at opset < 20, tf2onnx, paddle2onnx) → gelu(x):
//   x · 0.5 · (1 + erf(x · 0.70710678))     (x / 1.41421356 the same; the 0.5
//                                             first, last or inside; 1 + e or e + 1)
// GELU, tanh form (torch approximate='tanh', HF NewGELU, Keras) → gelu(x, "tanh"):
//   x · 0.5 · (1 + tanh(0.79788456 · (x + 0.044715 · x·x·x)))
//                                            (x³ as pow(x, 3) becomes x·x·x first)
// SiLU / Swish → silu(x):
//   x · sigmoid(x), sigmoid(x) · x
// Softmax (hand-written, some tf2onnx graphs) → softmax(x, a):
//   e = exp(x - max(x, [a], keepdims)); e / sum(e, [a], keepdims)   (or e · (1 / sum))
//   the max and the sum over the same one axis.
//
// Every intermediate must be read only inside the pattern (e by the sum and
// the division), else the node stays as it is, so no work is done twice.
// The result must have x's type (no scalar that widens x). Near misses (a
// wrong constant, sigmoid(β·x), a softmax whose max and sum take different
// axes) are in test/unit/Transforms/CanonicalizeTest.cpp.
#include "maxc/Transforms/FuseActivations.h"

#include "maxc/Ops/Ops.h"

#include <cmath>
#include <set>

namespace maxc {

double constant_tolerance(DType dtype) {
  switch (dtype) {
  case DType::f16: // half an ulp: the ideal constant rounded to the dtype passes, the next one does not
    return 5e-4;
  case DType::bf16:
    return 4e-3;
  default:
    return 1e-6;
  }
}

namespace {

/// A product read as its factors: scale · factors[0] · factors[1] · ...
struct Product {
  double scale = 1;
  std::vector<ValueId> factors; // the non-constant factors, in operand order
};

class ActivationMatcher {
public:
  ActivationMatcher(const GraphMatcher &m, ValueId root_value)
      : m_(m), dtype_(m.graph().type_of(root_value).dtype) {}

  /// v as a product: mul nodes and divisions by a scalar constant read
  /// through while they are read only here (the root's node always); at most
  /// `max_factors` non-constant factors.
  std::optional<Product> product(ValueId v, bool root, size_t max_factors) const {
    Product p;
    if (!flatten(v, root, p, max_factors))
      return std::nullopt;
    return p;
  }

  /// c is `want` within the dtype's tolerance.
  bool near(double c, double want) const {
    return std::fabs(c - want) <= constant_tolerance(dtype_) * std::fabs(want);
  }

  /// v = a + b with one side the scalar `c` (within tolerance), read only
  /// here: the other side.
  std::optional<ValueId> plus_constant(ValueId v, double c) const {
    const Node *n = m_.producer_op(v, "add");
    if (!n || !m_.single_use(v))
      return std::nullopt;
    for (size_t side = 0; side < 2; ++side) {
      std::optional<double> k = m_.scalar(n->operands[1 - side]);
      if (k && near(*k, c)) {
        return n->operands[side];
      }
    }
    return std::nullopt;
  }

  /// v = op(u), read only here: u.
  std::optional<ValueId> unary(ValueId v, const char *op) const {
    const Node *n = m_.producer_op(v, op);
    if (!n || !m_.single_use(v))
      return std::nullopt;
    return n->operands[0];
  }

  /// v = c · x (within tolerance) as a product of x alone.
  bool scaled_x(ValueId v, ValueId x, double c) const {
    auto p = product(v, false, 1);
    if (!p || p->factors.size() != 1 || p->factors[0] != x || !near(p->scale, c))
      return false;
    return true;
  }

  const GraphMatcher &m_;

private:
  bool flatten(ValueId v, bool root, Product &p, size_t max_factors) const {
    const Node *n = m_.producer(v);
    bool through = n && (root || m_.single_use(v));
    if (through && n->op == "mul") {
      return flatten(n->operands[0], false, p, max_factors) && flatten(n->operands[1], false, p, max_factors);
    }
    if (through && n->op == "div") {
      std::optional<double> c = m_.scalar(n->operands[1]);
      if (c && *c != 0 && std::isfinite(*c)) {
          p.scale /= *c;
        return flatten(n->operands[0], false, p, max_factors);
      }
    }
    if (!root) {
      if (std::optional<double> c = m_.scalar(v)) {
        p.scale *= *c;
        return true;
      }
    }
    p.factors.push_back(v);
    return p.factors.size() <= max_factors;
  }

  DType dtype_;
};

/// x, when the node's result has x's type and a float dtype.
bool keeps_type(const Graph &g, const Node &node, ValueId x) {
  const TensorType &t = g.type_of(node.results[0]);
  return is_float(t.dtype) && g.type_of(x) == t;
}

/// x · 0.5 · (1 + f(...)) with f read only here: the product's x and f's
/// operand. `f` is "erf" or "tanh".
std::optional<std::pair<ValueId, ValueId>> half_x_one_plus(const ActivationMatcher &am, const Node &node,
                                                           const char *f) {
  auto p = am.product(node.results[0], true, 2);
  if (!p || p->factors.size() != 2 || !am.near(p->scale, 0.5))
    return std::nullopt;
  for (size_t side = 0; side < 2; ++side) {
    ValueId x = p->factors[side];
    auto e = am.plus_constant(p->factors[1 - side], 1.0);
    if (!e)
      continue;
    auto arg = am.unary(*e, f);
    if (arg)
      return std::make_pair(x, *arg);
  }
  return std::nullopt;
}

class GeluErfPattern final : public RewritePattern {
public:
  const char *name() const override { return "gelu-erf"; }
  const char *root_op() const override { return "mul"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    ActivationMatcher am(rc.match, node.results[0]);
    auto xa = half_x_one_plus(am, node, "erf");
    if (!xa || !keeps_type(rc.match.graph(), node, xa->first) || !am.scaled_x(xa->second, xa->first, M_SQRT1_2))
      return {};
    return {ops::gelu(rc.value(xa->first), "none")};
  }
};

class GeluTanhPattern final : public RewritePattern {
public:
  const char *name() const override { return "gelu-tanh"; }
  const char *root_op() const override { return "mul"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    ActivationMatcher am(rc.match, node.results[0]);
    auto xa = half_x_one_plus(am, node, "tanh");
    if (!xa || !keeps_type(rc.match.graph(), node, xa->first))
      return {};
    ValueId x = xa->first;
    // The tanh's operand: √(2/π) · (x + 0.044715 · x·x·x).
    auto outer = am.product(xa->second, false, 1);
    if (!outer || outer->factors.size() != 1 || !am.near(outer->scale, std::sqrt(2.0 / M_PI)))
      return {};
    const Node *sum = rc.match.producer_op(outer->factors[0], "add");
    if (!sum || !rc.match.single_use(outer->factors[0]))
      return {};
    for (size_t side = 0; side < 2; ++side) {
      if (sum->operands[side] != x)
        continue;
      auto cube = am.product(sum->operands[1 - side], false, 3);
      if (!cube || !am.near(cube->scale, 0.044715) || cube->factors != std::vector<ValueId>{x, x, x})
        continue;
      return {ops::gelu(rc.value(x), "tanh")};
    }
    return {};
  }
};

class SiluPattern final : public RewritePattern {
public:
  const char *name() const override { return "silu"; }
  const char *root_op() const override { return "mul"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    ActivationMatcher am(rc.match, node.results[0]);
    for (size_t side = 0; side < 2; ++side) {
      ValueId x = node.operands[side];
      auto arg = am.unary(node.operands[1 - side], "sigmoid");
      if (arg && *arg == x && keeps_type(rc.match.graph(), node, x))
        return {ops::silu(rc.value(x))};
    }
    return {};
  }
};

/// ReLU6 as exported (Clip(y, 0, 6) imports as minimum(maximum(y, 0), 6);
/// Relu then Min, Relu then Clip(0, 6), or the bounds the other way round,
/// too), read only here: y.
std::optional<ValueId> relu6(const ActivationMatcher &am, ValueId v) {
  const GraphMatcher &m = am.m_;
  const Node *outer = m.producer(v);
  if (!outer || !m.single_use(v) || (outer->op != "minimum" && outer->op != "maximum"))
    return std::nullopt;
  bool min_outside = outer->op == "minimum";
  for (size_t side = 0; side < 2; ++side) {
    std::optional<double> bound = m.scalar(outer->operands[1 - side]);
    if (!bound || *bound != (min_outside ? 6.0 : 0.0))
      continue;
    ValueId mid = outer->operands[side];
    const Node *inner = m.producer_op(mid, min_outside ? "maximum" : "minimum");
    if (!inner && min_outside) { // Relu, then Min 6
      const Node *r = m.producer_op(mid, "relu");
      if (r && m.single_use(mid))
        return r->operands[0];
    }
    if (!inner || !m.single_use(mid))
      continue;
    for (size_t s2 = 0; s2 < 2; ++s2) {
      std::optional<double> b2 = m.scalar(inner->operands[1 - s2]);
      if (!b2 || *b2 != (min_outside ? 0.0 : 6.0))
        continue;
      // torch 1.13 exports relu6 as Relu, then Clip(0, 6): the relu is redundant.
      ValueId y = inner->operands[s2];
      const Node *r = min_outside ? m.producer_op(y, "relu") : nullptr;
      return r && m.single_use(y) ? r->operands[0] : y;
    }
  }
  return std::nullopt;
}

/// HardSigmoid / HardSwish spelled through ReLU6 (paddle2onnx, tf2onnx's
/// Keras hard_swish, torch's x * F.relu6(x + 3) / 6):
///   relu6(x + 3) · (1/6)         → hard_sigmoid(x)
///   x · relu6(x + 3) · (1/6)     → x · hard_sigmoid(x)      (any association)
/// hard_sigmoid(x) written the way the ONNX importer writes HardSigmoid
/// (alpha 1/6, beta 1/2) and HardSwish: maximum(0, minimum(1, x·(1/6) + 0.5)),
/// which the planner fuses into one elementwise loop like any other chain.
class HardSigmoidPattern final : public RewritePattern {
public:
  const char *name() const override { return "hard-sigmoid"; }
  const char *root_op() const override { return "mul"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const GraphMatcher &m = rc.match;
    auto match = find(m, node);
    if (!match)
      return {};
    // relu6(x + 3) · (1/6) read only by a product that matches as a whole
    // (x · that): leave it to that product, rewritten once.
    ValueId r = node.results[0];
    if (!match->second && m.single_use(r)) {
      const Node &reader = m.graph().nodes()[static_cast<size_t>(m.readers().of(r)[0])];
      if (reader.op == "mul" && find(m, reader))
        return {};
    }
    const Tensor &xv = rc.value(match->first);
    DType d = xv.dtype();
    Tensor h = ops::maximum(ops::scalar(0, d), ops::minimum(ops::scalar(1, d), ops::add(ops::mul(xv, ops::scalar(1.0 / 6, d)),
                                                                                         ops::scalar(0.5, d))));
    return {match->second ? ops::mul(rc.value(*match->second), h) : h};
  }

private:
  /// The x of relu6(x + 3) and the other factor, if any, of the product at
  /// `node`.
  static std::optional<std::pair<ValueId, std::optional<ValueId>>> find(const GraphMatcher &m, const Node &node) {
    ActivationMatcher am(m, node.results[0]);
    auto p = am.product(node.results[0], true, 2);
    if (!p || p->factors.empty() || !am.near(p->scale, 1.0 / 6))
      return std::nullopt;
    for (size_t i = 0; i < p->factors.size(); ++i) {
      auto y = relu6(am, p->factors[i]);
      std::optional<ValueId> x = y ? am.plus_constant(*y, 3.0) : std::nullopt;
      if (!x)
        continue;
      std::optional<ValueId> other;
      if (p->factors.size() == 2)
        other = p->factors[1 - i];
      if (!keeps_type(m.graph(), node, *x) || (other && !keeps_type(m.graph(), node, *other)))
        continue;
      return std::make_pair(*x, other);
    }
    return std::nullopt;
  }
};

/// The one axis (counted from 0) of a keepdims reduction `op` of x.
std::optional<int64_t> keepdims_axis(const Node &n, const Graph &g) {
  std::vector<int64_t> axes = n.attrs.get_ints("axes");
  if (!n.attrs.get_bool("keepdims") || axes.size() != 1)
    return std::nullopt;
  int64_t rank = g.type_of(n.operands[0]).rank();
  int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
  if (a < 0 || a >= rank)
    return std::nullopt;
  return a;
}

/// e / sum(e) or e · (1 / sum(e)), e = exp(x - max(x)), one axis for both.
class SoftmaxPattern final : public RewritePattern {
public:
  explicit SoftmaxPattern(const char *op) : op_(op) {}
  const char *name() const override { return "softmax"; }
  const char *root_op() const override { return op_; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const GraphMatcher &m = rc.match;
    for (size_t side = 0; side < (node.op == "mul" ? 2u : 1u); ++side) {
      ValueId e = node.operands[side], s = node.operands[1 - side];
      if (node.op == "mul") { // s = 1 / sum
        const Node *recip = m.producer_op(s, "div");
        std::optional<double> one = recip ? m.scalar(recip->operands[0]) : std::nullopt;
        if (!one || *one != 1 || !m.single_use(s))
          continue;
        s = recip->operands[1];
      }
      if (auto y = match(node, e, s, rc); !y.empty())
        return y;
    }
    return {};
  }

private:
  std::vector<Tensor> match(const Node &node, ValueId e, ValueId s, RewriteContext &rc) const {
    const GraphMatcher &m = rc.match;
    const Graph &g = m.graph();
    const Node *sum = m.producer_op(s, "sum");
    const Node *exp = m.producer_op(e, "exp");
    if (!sum || !exp || sum->operands[0] != e || !m.single_use(s))
      return {};
    // e is read by the sum and this node (or the reciprocal's mul) alone.
    const std::vector<int64_t> &readers = m.readers().of(e);
    if (readers.size() != 2 || readers[0] < 0 || readers[1] < 0 ||
        std::set<int64_t>{readers[0], readers[1]} != std::set<int64_t>{static_cast<int64_t>(m.index(sum)),
                                                                      static_cast<int64_t>(m.index(&node))})
      return {};
    const Node *sub = m.producer_op(exp->operands[0], "sub");
    if (!sub || !m.single_use(exp->operands[0]))
      return {};
    ValueId x = sub->operands[0];
    const Node *mx = m.producer_op(sub->operands[1], "max");
    if (!mx || mx->operands[0] != x || !m.single_use(sub->operands[1]))
      return {};
    std::optional<int64_t> a = keepdims_axis(*sum, g), b = keepdims_axis(*mx, g);
    if (!a || !b || *a != *b || !keeps_type(rc.match.graph(), node, x))
      return {};
    return {ops::softmax(rc.value(x), *a)};
  }

  const char *op_;
};

} // namespace

const std::vector<const RewritePattern *> &activation_patterns() {
  static const GeluErfPattern gelu_erf;
  static const GeluTanhPattern gelu_tanh;
  static const SiluPattern silu;
  static const SoftmaxPattern softmax_div("div"), softmax_mul("mul");
  static const HardSigmoidPattern hard_sigmoid;
  static const std::vector<const RewritePattern *> list = {&gelu_erf,    &gelu_tanh,   &silu,
                                                           &softmax_div, &softmax_mul, &hard_sigmoid};
  return list;
}

} // namespace maxc
