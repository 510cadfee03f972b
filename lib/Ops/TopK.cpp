// top_k (Ops/TopK.h): the op, its reference kernel and its primitives.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Ops/TopK.h"
#include "maxc/Realization/RealizationContext.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace maxc {
using namespace ophelpers;

namespace {

const Dim &k_of(const Attrs &attrs) {
  const Shape &k = attrs.get_shape("k");
  if (k.size() != 1)
    fail_attr(kTopKOp, "k must be one dim, got " + shape_to_string(k));
  return k[0];
}

OpDef top_k_op() {
  OpDef def;
  def.name = kTopKOp;
  def.traits = OpTrait::composite;
  def.summary = "the k first of each row (last axis) and their indices: largest (or smallest) first, ties by lower "
                "index, NaN above every number";
  def.min_operands = def.max_operands = 1;
  def.attrs = {{"k", AttrKind::shape, std::nullopt, "how many (one dim, e.g. [300] or [k])"},
               {"largest", AttrKind::boolean, AttrValue(true), "largest first (else smallest first)"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_min_rank(kTopKOp, x, 1);
    if (!is_float(x.dtype) && !is_integer(x.dtype))
      throw Error(ErrorCode::DTypeMismatch, std::string(kTopKOp) + ": expects a number tensor, got " + x.to_string());
    const Dim &k = k_of(c.attrs), &n = x.shape.back();
    if (k.is_static() && (k.value() < 0 || (n.is_static() && k.value() > n.value())))
      fail_attr(kTopKOp, "k " + k.to_string() + " is outside [0, " + n.to_string() + "]");
    Shape values = x.shape;
    values.back() = k;
    return std::vector<TensorType>{TensorType(x.dtype, values, x.device), TensorType(DType::i64, values, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    bool largest = c.attrs.get_bool("largest");
    HostTensor values = c.make_result(0), indices = c.make_result(1);
    int64_t n = x.shape().back(), k = values.shape().back();
    if (k > n)
      throw Error(ErrorCode::InvalidArgument, std::string(kTopKOp) + ": k " + std::to_string(k) +
                                                  " is larger than the row's " + std::to_string(n) + " elements");
    int64_t rows = n ? x.numel() / n : 0;
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      auto at = [&](int64_t i) { return x.get_f64(r * n + i); };
      auto before = [&](int64_t a, int64_t b) { // a ranks before b
        double va = at(a), vb = at(b);
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb)
          return largest ? (na && !nb) || (na && nb && a < b) : (nb && !na) || (na && nb && a < b);
        return largest ? va > vb || (va == vb && a < b) : va < vb || (va == vb && a < b);
      };
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        values.set_f64(r * k + j, at(order[j]));
        indices.set_i64(r * k + j, order[j]);
      }
    }
    return std::vector<HostTensor>{values, indices};
  };
  return def;
}

/// The k first of m's last axis (n <= kTopKRankLimit elements) in order, by
/// ranking: rank_i = #{j : m_j before m_i}, then a one-hot select per output
/// position, of m and of `payload` (what the indices output carries,
/// broadcast against m).
std::pair<Tensor, Tensor> rank_top_k(const Tensor &m, const Tensor &payload, const Dim &k, bool largest) {
  int64_t r = m.rank(), n = m.shape()[r - 1].value();
  Tensor xi = ops::unsqueeze(m, {r}), xj = ops::unsqueeze(m, {r - 1}); // [...,n,1], [...,1,n]
  Shape nn{Dim(n), Dim(n)};
  Tensor i_idx = ops::iota(nn, 0, DType::i64), j_idx = ops::iota(nn, 1, DType::i64);
  Tensor better = largest ? ops::greater(xj, xi) : ops::less(xj, xi);
  Tensor same = ops::equal(xj, xi);
  if (is_float(m.dtype())) { // NaN above every number; NaNs among themselves by index
    Tensor nan_i = ops::not_equal(xi, xi), nan_j = ops::not_equal(xj, xj);
    Tensor number_i = ops::logical_not(nan_i), number_j = ops::logical_not(nan_j);
    better = largest ? ops::logical_or(better, ops::logical_and(nan_j, number_i))
                     : ops::logical_or(ops::logical_and(better, number_i), ops::logical_and(number_j, nan_i));
    same = ops::logical_or(same, ops::logical_and(nan_i, nan_j));
  }
  Tensor before = ops::logical_or(better, ops::logical_and(same, ops::less(j_idx, i_idx)));
  Tensor rank = ops::sum(ops::cast(before, DType::i64), {r}, false); // [..., n]
  Tensor hit = ops::equal(ops::unsqueeze(rank, {r}), ops::iota({Dim(n), k}, 1, DType::i64)); // [..., n, k]
  Tensor values = ops::sum(ops::where(hit, xi, ops::scalar(0, m.dtype())), {r - 1}, false);
  Tensor carried =
      ops::sum(ops::where(hit, ops::unsqueeze(payload, {r}), ops::scalar(0, payload.dtype())), {r - 1}, false);
  return {values, carried};
}

} // namespace

void register_top_k_ops(OpRegistry &r) { r.add(top_k_op()); }

namespace ops {

std::vector<Tensor> top_k(const Tensor &x, const Dim &k, bool largest) {
  return record_op_multi(kTopKOp, {x}, {{"k", Shape{k}}, {"largest", largest}});
}

std::vector<Tensor> top_k_primitives(const std::vector<Tensor> &in, const Attrs &attrs, int64_t rank_limit) {
  const Tensor &m = in.at(0);
  const Dim &k = k_of(attrs);
  bool largest = attrs.get_bool("largest", true);
  int64_t last = m.rank() - 1;
  if (!m.shape()[last].is_static())
    throw Error(ErrorCode::InvalidGraph, std::string(kTopKOp) + ": the row length " + m.shape()[last].to_string() +
                                             " must be static here (the CPU keeps top_k whole)");
  int64_t n = m.shape()[last].value(), chunks = (n + rank_limit - 1) / rank_limit;
  if (chunks > 1 && (!k.is_static() || k.value() > n / chunks || chunks * k.value() > rank_limit))
    throw Error(ErrorCode::InvalidGraph,
                std::string(kTopKOp) + " over " + std::to_string(n) + " elements with k=" + k.to_string() +
                    " is decomposed only with k static, at most a chunk of " + std::to_string(rank_limit) +
                    " elements' share (the CPU keeps top_k whole)");
  auto positions = [&](int64_t from, int64_t count) { // [1..., count]: from, from + 1, ... (broadcast over m's rows)
    Shape s(static_cast<size_t>(m.rank()), Dim(1));
    s.back() = Dim(count);
    return ops::add(ops::iota(s, last, DType::i64), ops::scalar(double(from), DType::i64));
  };
  std::pair<Tensor, Tensor> top;
  if (chunks == 1) {
    top = rank_top_k(m, positions(0, n), k, largest);
  } else {
    std::vector<Tensor> values, indices;
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t c0 = n * c / chunks, c1 = n * (c + 1) / chunks;
      auto [v, i] = rank_top_k(ops::slice(m, {c0}, {c1}, {last}), positions(c0, c1 - c0), k, largest);
      values.push_back(v);
      indices.push_back(i);
    }
    top = rank_top_k(ops::concat(values, last), ops::concat(indices, last), k, largest);
  }
  return {top.first, top.second};
}

} // namespace ops

} // namespace maxc
