#include "maxc/Transforms/FuseAttention.h"

#include <cmath>

namespace maxc {

namespace {

struct Matcher {
  const Graph &g;
  GraphMatcher m; // producers, readers and scalar constants (Rewrite.h)

  const Node *producer(ValueId v) const { return m.producer(v); }
  size_t index(const Node *n) const { return m.index(n); }
  /// v is read by exactly one node (and is no graph output).
  bool single_use(ValueId v) const { return m.single_use(v); }
  bool low_precision = false; // f16/bf16 patterns too (match_attention)
  bool kv_groups = false;     // grouped-query k and v read in place (match_attention)
  /// f32, or f16/bf16 when low_precision (the pattern's one dtype is checked in match).
  bool f32(ValueId v) const {
    DType d = g.type_of(v).dtype;
    return d == DType::f32 || (low_precision && (d == DType::f16 || d == DType::bf16));
  }

  /// The value of a one-element f32 constant or full, if v is one.
  std::optional<double> scalar(ValueId v) const { return f32(v) ? m.scalar(v) : std::nullopt; }

  /// t = q @ k^T (transpose_b, or an explicit transpose of k's last two
  /// dims used only here): fills q, k and the inner nodes.
  bool scores(ValueId t, AttentionMatch &m) const {
    const Node *n = producer(t);
    if (!n || n->op != "matmul" || !single_use(t) || n->attrs.get_bool("transpose_a"))
      return false;
    m.q = n->operands[0];
    m.k = n->operands[1];
    m.inner.push_back(index(n));
    // (q·a) @ (k^T·b) = (q @ k^T)·ab: torch's scaled_dot_product_attention
    // export scales both operands by sqrt(scale).
    unscale(m.q, m);
    unscale(m.k, m);
    if (n->attrs.get_bool("transpose_b"))
      return true;
    const Node *tr = producer(m.k);
    if (!tr || tr->op != "transpose" || !single_use(m.k))
      return false;
    // k^T = transpose(x, perm), so k = transpose(x, perm with its last two
    // entries swapped): torch exports transpose [b, s, h, d] straight to
    // [b, h, d, s] (perm 0 2 3 1), then k = x permuted by 0 2 1 3.
    std::vector<int64_t> perm = tr->attrs.get_ints("perm");
    size_t r = perm.size();
    if (r < 2)
      return false;
    std::swap(perm[r - 2], perm[r - 1]);
    bool identity = true;
    for (size_t i = 0; i < r; ++i)
      identity = identity && perm[i] == static_cast<int64_t>(i);
    m.k_perm = identity ? std::vector<int64_t>{} : perm;
    m.k = tr->operands[0];
    m.inner.push_back(index(tr));
    return true;
  }

  /// v = x·c, c·x or x/c for a scalar constant c, v read only here and of
  /// x's shape: v becomes x, c joins the scale and the node the pattern.
  void unscale(ValueId &v, AttentionMatch &m) const {
    const Node *n = producer(v);
    if (!n || !single_use(v) || (n->op != "mul" && n->op != "div"))
      return;
    for (size_t side = 0; side < 2; ++side) {
      if (n->op == "div" && side == 1)
        break;
      std::optional<double> c = scalar(n->operands[1 - side]);
      ValueId x = n->operands[side];
      if (!c || (n->op == "div" && *c == 0) || !(g.type_of(x) == g.type_of(v)))
        continue;
      m.scale *= n->op == "div" ? 1.0 / *c : *c;
      m.inner.push_back(index(n));
      v = x;
      return;
    }
  }

  /// s = t, or t scaled by a scalar.
  bool scaled(ValueId s, AttentionMatch &m) const {
    const Node *n = producer(s);
    if (n && single_use(s) && (n->op == "mul" || n->op == "div")) {
      for (size_t side = 0; side < 2; ++side) {
        if (n->op == "div" && side == 1)
          break;
        std::optional<double> c = scalar(n->operands[1 - side]);
        if (!c || (n->op == "div" && *c == 0))
          continue;
        AttentionMatch tried = m;
        if (scores(n->operands[side], tried)) {
          m = tried;
          m.scale *= n->op == "div" ? 1.0 / *c : *c;
          m.inner.push_back(index(n));
          return true;
        }
      }
    }
    return scores(s, m);
  }

  /// x = s, where(mask, s, fill), or s + mask.
  bool masked(ValueId x, AttentionMatch &m) const {
    const Node *n = producer(x);
    if (n && single_use(x) && n->op == "where" && g.type_of(n->operands[0]).dtype == DType::boolean) {
      // where(mask, s, f) keeps s where the mask is true; where(mask, f, s)
      // (torch's masked_fill in the GPT-2 and Llama exports) where it is false.
      for (size_t side = 1; side < 3; ++side) {
        std::optional<double> fill = scalar(n->operands[3 - side]);
        AttentionMatch tried = m;
        if (fill && g.type_of(n->operands[side]).shape == g.type_of(x).shape && scaled(n->operands[side], tried)) {
          m = tried;
          m.mask = n->operands[0];
          m.mask_inverted = side == 2;
          m.fill = *fill;
          m.inner.push_back(index(n));
          return true;
        }
      }
    }
    if (n && single_use(x) && n->op == "add") {
      for (size_t side = 0; side < 2; ++side) {
        AttentionMatch tried = m;
        ValueId s = n->operands[side], mask = n->operands[1 - side];
        if (g.type_of(s).shape == g.type_of(x).shape && f32(mask) && scaled(s, tried)) {
          m = tried;
          m.mask = mask;
          m.inner.push_back(index(n));
          return true;
        }
      }
    }
    return scaled(x, m);
  }

  std::optional<AttentionMatch> match(const Node &out) const {
    if (out.op != "matmul" || out.attrs.get_bool("transpose_a") || out.attrs.get_bool("transpose_b") ||
        !f32(out.results[0]))
      return std::nullopt;
    ValueId p = out.operands[0];
    const Node *sm = producer(p);
    if (!sm || sm->op != "softmax" || !single_use(p))
      return std::nullopt;
    const Shape &ps = g.type_of(p).shape;
    int64_t axis = sm->attrs.get_int("axis");
    if (axis != -1 && axis != static_cast<int64_t>(ps.size()) - 1)
      return std::nullopt;
    AttentionMatch m;
    m.v = out.operands[1];
    m.inner.push_back(index(sm));
    if (!masked(sm->operands[0], m))
      return std::nullopt;
    // One batch shape for q, k, v (no broadcasting), static head dims.
    Shape ks = g.type_of(m.k).shape;
    if (!m.k_perm.empty()) {
      Shape permuted;
      for (int64_t p : m.k_perm)
        permuted.push_back(ks[static_cast<size_t>(p)]);
      ks = permuted;
    }
    const Shape &qs = g.type_of(m.q).shape, &vs = g.type_of(m.v).shape;
    size_t r = qs.size();
    DType dt = g.type_of(out.results[0]).dtype;
    bool one_dtype = g.type_of(m.q).dtype == dt && g.type_of(m.k).dtype == dt && g.type_of(m.v).dtype == dt &&
                     (!m.mask || g.type_of(*m.mask).dtype == DType::boolean || g.type_of(*m.mask).dtype == dt);
    if (r < 2 || ks.size() != r || vs.size() != r || !one_dtype ||
        !qs[r - 1].is_static() || !vs[r - 1].is_static() || ks[r - 1] != qs[r - 1] || vs[r - 2] != ks[r - 2])
      return std::nullopt;
    for (size_t i = 0; i + 2 < r; ++i)
      if (ks[i] != qs[i] || vs[i] != qs[i])
        return std::nullopt;
    // Grouped-query attention: k and v each x repeated over groups of heads.
    if (kv_groups && m.k_perm.empty() && r >= 3) {
      AttentionMatch grouped = m;
      int64_t gk = 0, gv = 0;
      if (ungroup(grouped.k, gk, grouped) && ungroup(grouped.v, gv, grouped) && gk == gv) {
        grouped.kv_groups = gk;
        return grouped;
      }
    }
    return m;
  }

  /// v = reshape(broadcast_to(unsqueeze(x))) [*B, KVH*g, S, D] from x
  /// [*B, KVH, S, D] through [*B, KVH, 1, S, D] and [*B, KVH, g, S, D]
  /// (the unsqueeze may be a reshape): v becomes x, g > 1 is returned in
  /// `groups`, the three nodes join the pattern's inner nodes.
  bool ungroup(ValueId &v, int64_t &groups, AttentionMatch &m, bool heads = true) const {
    const Node *rs = producer(v);
    if (heads && rs && rs->op == "concat" && single_use(v)) // (a part is never a concat again: no recursion)
      return ungroup_heads(v, groups, m);
    if (!rs || rs->op != "reshape" || !single_use(v))
      return false;
    ValueId b = rs->operands[0];
    const Node *bc = producer(b);
    if (!bc || bc->op != "broadcast_to" || !single_use(b))
      return false;
    ValueId u = bc->operands[0];
    const Node *un = producer(u);
    if (!un || (un->op != "unsqueeze" && un->op != "reshape") || !single_use(u))
      return false;
    ValueId x = un->operands[0];
    const Shape &vs = g.type_of(v).shape, &bs = g.type_of(b).shape, &us = g.type_of(u).shape,
                &xs = g.type_of(x).shape;
    size_t r = vs.size();
    if (bs.size() != r + 1 || us.size() != r + 1 || xs.size() != r || !bs[r - 2].is_static() ||
        bs[r - 2].value() < 2 || !bs[r - 3].is_static() || !vs[r - 3].is_static() ||
        bs[r - 3].value() * bs[r - 2].value() != vs[r - 3].value())
      return false;
    for (size_t i = 0; i < r; ++i) { // x's dims: v's, but for the heads
      if (i + 3 != r && xs[i] != vs[i])
        return false;
      size_t j = i < r - 2 ? i : i + 1; // x's dim i is b's and u's dim j
      if (xs[i] != bs[j] || xs[i] != us[j])
        return false;
    }
    if (us[r - 2] != Dim(1))
      return false;
    groups = bs[r - 2].value();
    v = x;
    for (const Node *n : {rs, bc, un})
      m.inner.push_back(index(n));
    return true;
  }

  /// torch 1.13's repeat_interleave: v = concat(parts, heads axis), part i
  /// the repeat (ungroup) of result i of one split of x [*B, KVH, S, D] into
  /// single heads, every part by the same g: v becomes x.
  bool ungroup_heads(ValueId &v, int64_t &groups, AttentionMatch &m) const {
    const Node *cat = producer(v);
    size_t r = g.type_of(v).shape.size();
    int64_t axis = cat->attrs.get_int("axis");
    if (r < 3 || (axis < 0 ? axis + static_cast<int64_t>(r) : axis) != static_cast<int64_t>(r) - 3)
      return false;
    AttentionMatch tried = m;
    const Node *split = nullptr;
    int64_t g0 = 0;
    for (size_t i = 0; i < cat->operands.size(); ++i) {
      ValueId part = cat->operands[i];
      int64_t gi = 0;
      if (std::count(cat->operands.begin(), cat->operands.end(), part) != 1 || !ungroup(part, gi, tried, false) ||
          (i > 0 && gi != g0))
        return false;
      g0 = gi;
      const ValueInfo &info = g.value_info(part);
      const Node *sp = producer(part);
      if (!sp || sp->op != "split" || (split && sp != split) || info.index != i || !single_use(part))
        return false;
      split = sp;
    }
    if (!split || split->results.size() != cat->operands.size())
      return false;
    ValueId x = split->operands[0];
    int64_t split_axis = split->attrs.get_int("axis");
    const Shape &xs = g.type_of(x).shape;
    if (xs.size() != r || (split_axis < 0 ? split_axis + static_cast<int64_t>(r) : split_axis) != static_cast<int64_t>(r) - 3 ||
        xs[r - 3] != Dim(static_cast<int64_t>(split->results.size())))
      return false;
    tried.inner.push_back(index(cat));
    tried.inner.push_back(index(split));
    m = tried;
    groups = g0;
    v = x;
    return true;
  }
};

} // namespace

std::map<size_t, AttentionMatch> match_attention(const Graph &g, const Readers &readers, bool low_precision,
                                                 bool kv_groups) {
  std::map<size_t, AttentionMatch> out;
  Matcher matcher{g, GraphMatcher(g, readers), low_precision, kv_groups};
  for (size_t n = 0; n < g.nodes().size(); ++n)
    if (auto m = matcher.match(g.nodes()[n]))
      out[n] = *m;
  return out;
}

bool is_causal_mask(const Graph &g, ValueId mask, const Shape &q, const Shape &k) {
  const Shape &ms = g.type_of(mask).shape;
  size_t r = ms.size(), rq = q.size();
  if (g.type_of(mask).dtype != DType::boolean || r < 2 || ms[r - 2] != q[rq - 2] || ms[r - 1] != k[rq - 2])
    return false;
  auto producer = [&](ValueId v) -> const Node * {
    int64_t p = g.value_info(v).producer;
    return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
  };
  const Node *n = producer(mask);
  if (!n)
    return false;
  // A constant [.., Sq, Sk] whose every [Sq, Sk] slice is (j <= i) == keep.
  auto constant = [&](const Node *c, bool keep) {
    if (c->op != "constant" || !shape_is_static(ms))
      return false;
    const HostTensor &t = g.constant(c->attrs.get_string("name"));
    int64_t sq = ms[r - 2].value(), sk = ms[r - 1].value();
    for (int64_t e = 0; e < t.numel(); ++e) {
      int64_t i = e / sk % sq, j = e % sk;
      if ((t.get_i64(e) != 0) != ((j <= i) == keep))
        return false;
    }
    return true;
  };
  if (n->op == "not" && producer(n->operands[0]))
    return constant(producer(n->operands[0]), false);
  if (n->op == "constant")
    return constant(n, true);
  auto iota_axis = [&](ValueId v) -> int64_t { // the iota's axis counted from the end (1: rows, 0: cols), or -1
    const Node *i = producer(v);
    if (!i || i->op != "iota" || g.type_of(v).shape != ms)
      return -1;
    return static_cast<int64_t>(r) - 1 - i->attrs.get_int("axis");
  };
  if (n->operands.size() != 2 || (n->op != "ge" && n->op != "le"))
    return false;
  ValueId rows = n->operands[n->op == "ge" ? 0 : 1], cols = n->operands[n->op == "ge" ? 1 : 0];
  return iota_axis(rows) == 1 && iota_axis(cols) == 0;
}

} // namespace maxc
