// Normalizations spelled out by exporters, recognized as the composite ops
// (layer_norm, rms_norm) that the CPU lowers as one row kernel and other
// backends decompose again. Patterns on the rewrite driver (Rewrite.h),
// listed in Canonicalize.cpp after the algebraic rules, whose results they
// match (pow(d, 2) is d·d and d / sqrt(v) is d·rsqrt(v) by then).
//
// LayerNorm (torch at opset < 17, tf2onnx, paddle2onnx):
//   m = mean(x, A, keepdims)        A: the trailing k axes of x
//   d = x - m
//   v = mean(d·d, A, keepdims)
//   n = d · rsqrt(v + eps)          (either operand order anywhere)
//   y = n · w + b | b + w · n ...   w, b of shape x.shape[-k:]; the + b optional
//                                   (without it: the rms-norm pattern's root)
// RMSNorm (Llama-style exports):
//   n = x · rsqrt(mean(x·x, A, keepdims) + eps)
//   y = n · w | w · n
// Every intermediate must be read only inside the pattern (d by the square
// and the normalizing product); else the node stays as it is, so no work is
// done twice. Near misses (a mean over a leading axis, keepdims off, a
// weight that is not [x.shape[-k:]], an intermediate read elsewhere) are in
// test/unit/Transforms/CanonicalizeTest.cpp.
#include "maxc/Transforms/FuseNorms.h"

#include "maxc/Ops/Ops.h"

#include <algorithm>
#include <set>

namespace maxc {

namespace {

/// Operands (a, b) of binary node n, and (b, a).
std::vector<std::pair<ValueId, ValueId>> both_orders(const Node &n) {
  return {{n.operands[0], n.operands[1]}, {n.operands[1], n.operands[0]}};
}

struct NormMatch {
  ValueId x = 0;
  double eps = 0;
  size_t axes = 0;             // trailing axes normalized
  std::set<size_t> inner;      // the pattern's nodes up to n
  std::vector<ValueId> shared; // values read by several pattern nodes (d)
};

class NormMatcher {
public:
  explicit NormMatcher(const GraphMatcher &m) : m_(m) {}

  /// v = mean(u, trailing axes, keepdims): u and the axis count.
  std::optional<std::pair<ValueId, size_t>> trailing_mean(ValueId v, std::set<size_t> &inner) const {
    const Node *n = m_.producer_op(v, "mean");
    if (!n || !n->attrs.get_bool("keepdims"))
      return std::nullopt;
    int64_t rank = m_.graph().type_of(n->operands[0]).rank();
    std::vector<int64_t> axes = n->attrs.get_ints("axes");
    if (axes.empty() || rank == 0)
      return std::nullopt;
    for (int64_t &a : axes)
      a = a < 0 ? a + rank : a;
    std::sort(axes.begin(), axes.end());
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i))
        return std::nullopt;
    inner.insert(m_.index(n));
    return std::make_pair(n->operands[0], axes.size());
  }

  /// v = u · u: u.
  std::optional<ValueId> square(ValueId v, std::set<size_t> &inner) const {
    const Node *n = m_.producer_op(v, "mul");
    if (!n || n->operands[0] != n->operands[1])
      return std::nullopt;
    inner.insert(m_.index(n));
    return n->operands[0];
  }

  /// v = rsqrt(mean(u·u, A) + eps): u, eps, |A|.
  std::optional<std::tuple<ValueId, double, size_t>> rsqrt_mean_square(ValueId v, std::set<size_t> &inner) const {
    const Node *r = m_.producer_op(v, "rsqrt");
    if (!r)
      return std::nullopt;
    const Node *add = m_.producer_op(r->operands[0], "add");
    if (!add)
      return std::nullopt;
    for (auto [var, e] : both_orders(*add)) {
      std::optional<double> eps = m_.scalar(e);
      if (!eps)
        continue;
      std::set<size_t> tried = inner;
      auto mean = trailing_mean(var, tried);
      if (!mean)
        continue;
      auto u = square(mean->first, tried);
      if (!u)
        continue;
      tried.insert(m_.index(r));
      tried.insert(m_.index(add));
      inner = tried;
      return std::make_tuple(*u, *eps, mean->second);
    }
    return std::nullopt;
  }

  /// v = u · rsqrt(mean(u·u) + eps), either order: the normalized u.
  std::optional<NormMatch> normalized(ValueId v) const {
    const Node *n = m_.producer_op(v, "mul");
    if (!n)
      return std::nullopt;
    for (auto [u, s] : both_orders(*n)) {
      NormMatch match;
      auto ms = rsqrt_mean_square(s, match.inner);
      if (!ms || std::get<0>(*ms) != u)
        continue;
      match.x = u;
      match.eps = std::get<1>(*ms);
      match.axes = std::get<2>(*ms);
      match.inner.insert(m_.index(n));
      match.shared.push_back(u);
      return match;
    }
    return std::nullopt;
  }

  /// d = x - mean(x, A): x, when d normalized over the same axes.
  std::optional<ValueId> centered(ValueId d, size_t axes, std::set<size_t> &inner) const {
    const Node *n = m_.producer_op(d, "sub");
    if (!n)
      return std::nullopt;
    std::set<size_t> tried = inner;
    auto mean = trailing_mean(n->operands[1], tried);
    if (!mean || mean->first != n->operands[0] || mean->second != axes)
      return std::nullopt;
    tried.insert(m_.index(n));
    inner = tried;
    return n->operands[0];
  }

  /// Every value the pattern's nodes (but the root's) define is read only by
  /// pattern nodes.
  bool contained(const std::set<size_t> &inner, size_t root) const {
    for (size_t i : inner) {
      if (i == root)
        continue;
      for (ValueId r : m_.graph().nodes()[i].results)
        for (int64_t reader : m_.readers().of(r))
          if (reader < 0 || !inner.count(static_cast<size_t>(reader)))
            return false;
    }
    return true;
  }

  /// w has the shape of x's trailing `axes` dims and x's dtype.
  bool is_row_param(ValueId w, ValueId x, size_t axes) const {
    const TensorType &wt = m_.graph().type_of(w), &xt = m_.graph().type_of(x);
    if (wt.dtype != xt.dtype || wt.shape.size() != axes || xt.shape.size() < axes)
      return false;
    return std::equal(wt.shape.begin(), wt.shape.end(), xt.shape.end() - static_cast<std::ptrdiff_t>(axes));
  }

  const GraphMatcher &m_;
};

/// n · w, either order: (n's match, w).
std::optional<std::pair<NormMatch, ValueId>> scaled(const NormMatcher &nm, ValueId v, bool centered_input) {
  const Node *mul = nm.m_.producer_op(v, "mul");
  if (!mul)
    return std::nullopt;
  for (auto [n, w] : both_orders(*mul)) {
    auto match = nm.normalized(n);
    if (!match)
      continue;
    if (centered_input) {
      auto x = nm.centered(match->x, match->axes, match->inner);
      if (!x)
        continue;
      match->x = *x;
    }
    if (!nm.is_row_param(w, match->x, match->axes))
      continue;
    match->inner.insert(nm.m_.index(mul));
    return std::make_pair(*match, w);
  }
  return std::nullopt;
}

bool is_norm_dtype(const RewriteContext &rc, ValueId x) { return is_float(rc.match.graph().type_of(x).dtype); }

class LayerNormPattern final : public RewritePattern {
public:
  const char *name() const override { return "layer-norm"; }
  const char *root_op() const override { return "add"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    NormMatcher nm(rc.match);
    for (auto [s, b] : both_orders(node)) {
      auto sw = scaled(nm, s, true);
      if (!sw)
        continue;
      auto &[match, w] = *sw;
      if (!nm.is_row_param(b, match.x, match.axes) || !is_norm_dtype(rc, match.x))
        continue;
      match.inner.insert(rc.match.index(&node));
      if (!nm.contained(match.inner, rc.match.index(&node)))
        continue;
      return {ops::layer_norm(rc.value(match.x), rc.value(w), rc.value(b), match.eps)};
    }
    return {};
  }
};

class RmsNormPattern final : public RewritePattern {
public:
  const char *name() const override { return "rms-norm"; }
  const char *root_op() const override { return "mul"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    NormMatcher nm(rc.match);
    auto sw = scaled(nm, node.results[0], false);
    if (!sw)
      return {};
    auto &[match, w] = *sw;
    if (!is_norm_dtype(rc, match.x))
      return {};
    // x - mean(x) normalized: a layer norm without bias (Moonshine's), unless
    // a + b follows (the layer-norm pattern, rooted there, takes it whole).
    std::set<size_t> centered_inner = match.inner;
    if (std::optional<ValueId> x = nm.centered(match.x, match.axes, centered_inner)) {
      for (int64_t r : rc.match.readers().of(node.results[0])) {
        const Node *add = r >= 0 ? &rc.match.graph().nodes()[static_cast<size_t>(r)] : nullptr;
        if (add && add->op == "add" && add->operands.size() == 2)
          for (auto [y, b] : both_orders(*add))
            if (y == node.results[0] && nm.is_row_param(b, *x, match.axes))
              return {};
      }
      if (!nm.contained(centered_inner, rc.match.index(&node)))
        return {};
      return {ops::layer_norm(rc.value(*x), rc.value(w), std::nullopt, match.eps)};
    }
    if (!nm.contained(match.inner, rc.match.index(&node)))
      return {};
    return {ops::rms_norm(rc.value(match.x), rc.value(w), match.eps)};
  }
};

} // namespace

const std::vector<const RewritePattern *> &norm_patterns() {
  static const LayerNormPattern layer_norm;
  static const RmsNormPattern rms_norm;
  static const std::vector<const RewritePattern *> list = {&layer_norm, &rms_norm};
  return list;
}

} // namespace maxc
