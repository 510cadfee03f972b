// attention: softmax(scale * q @ k^T, masked) @ v — scaled dot-product
// attention as one op. Not traced from models directly: Transforms/
// FuseAttention recognizes it in the spelled-out pattern for backends that
// lower it whole (the CPU: Codegen/Cpu/AttentionEmitter); decompose()
// rewrites it back into matmul / softmax for every other backend.
//
//   q [*B, Sq, D], k [*B, Sk, D], v [*B, Sk, Dv] (the same batch dims, one
//   float dtype), optional mask broadcastable to [*B, Sq, Sk]: bool keeps a
//   score where true and puts `fill` elsewhere, a float mask is added.
//   Result [*B, Sq, Dv]. kv_groups = g > 1 (grouped-query attention): k and
//   v have 1/g of q's heads (the last batch dim), query head h reads kv head
//   h / g — HF's repeat_kv read in place (FuseAttention matches it).
//
// Reference semantics: scores, softmax and the weighted sum in double,
// rounded once.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/OpRegistry.h"

#include <cmath>
#include <limits>

namespace maxc {
using namespace ophelpers;

namespace {

OpDef attention_op() {
  OpDef def;
  def.name = "attention";
  def.traits = OpTrait::composite;
  def.summary = "softmax(scale * q @ k^T, masked) @ v: a bool mask puts fill where false, a float mask is added";
  def.min_operands = 3;
  def.max_operands = 4;
  def.attrs = {{"scale", AttrKind::real, AttrValue(1.0), "multiplies q @ k^T"},
               {"fill", AttrKind::real, AttrValue(0.0), "the score where a bool mask is false"},
               {"kv_groups", AttrKind::integer, AttrValue(int64_t(1)),
                "query heads per k/v head (grouped-query attention; k and v's last batch dim is q's / kv_groups)"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "attention";
    const TensorType &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
    require_float(op, q, "q");
    require_same_dtype(op, {q, k, v});
    require_same_device(op, c.operands);
    require_min_rank(op, q, 2, "q");
    if (k.rank() != q.rank() || v.rank() != q.rank())
      fail_shape(op, "q " + q.to_string() + ", k " + k.to_string() + " and v " + v.to_string() + " must have one rank");
    int64_t r = q.rank();
    Shape batch(q.shape.begin(), q.shape.end() - 2), kv_batch = batch;
    int64_t groups = c.attrs.get_int("kv_groups");
    if (groups < 1 || (groups > 1 && r < 3))
      fail_attr(op, "kv_groups " + std::to_string(groups) + " must be >= 1 (and > 1 only with a heads dim)");
    if (groups > 1) {
      const Dim &heads = batch.back();
      if (!heads.is_static() || heads.value() % groups != 0)
        fail_shape(op, "q " + q.to_string() + ": its heads dim must be a multiple of kv_groups " + std::to_string(groups));
      kv_batch.back() = Dim(heads.value() / groups);
    }
    if (Shape(k.shape.begin(), k.shape.end() - 2) != kv_batch || Shape(v.shape.begin(), v.shape.end() - 2) != kv_batch)
      fail_shape(op, "q " + q.to_string() + ", k " + k.to_string() + " and v " + v.to_string() +
                         " must have the same batch dims" + (groups > 1 ? " (k and v: 1/kv_groups of the heads)" : ""));
    if (k.shape[r - 1] != q.shape[r - 1])
      fail_shape(op, "k " + k.to_string() + " must have q's last dim (" + q.shape[r - 1].to_string() + ")");
    if (v.shape[r - 2] != k.shape[r - 2])
      fail_shape(op, "v " + v.to_string() + " must have as many rows as k " + k.to_string());
    Shape scores = batch;
    scores.push_back(q.shape[r - 2]);
    scores.push_back(k.shape[r - 2]);
    if (c.operands.size() > 3) {
      const TensorType &mask = c.operands[3];
      if (mask.dtype != DType::boolean && mask.dtype != q.dtype)
        fail_shape(op, "mask " + mask.to_string() + " must be bool or " + std::string(dtype_name(q.dtype)));
      if (broadcast_shapes(op, mask.shape, scores) != scores)
        fail_shape(op, "mask " + mask.to_string() + " must broadcast to the scores " + shape_to_string(scores));
    }
    Shape out = batch;
    out.push_back(q.shape[r - 2]);
    out.push_back(v.shape[r - 1]);
    return std::vector<TensorType>{TensorType(q.dtype, out)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
    const HostTensor *mask = c.operands.size() > 3 ? &c.operands[3] : nullptr;
    HostTensor out = c.make_result();
    double scale = c.attrs.get_real("scale"), fill = c.attrs.get_real("fill");
    int64_t groups = c.attrs.get_int("kv_groups"); // kv batch entry of q's entry b: b / groups
    const std::vector<int64_t> &qs = q.shape();
    size_t r = qs.size();
    int64_t sq = qs[r - 2], d = qs[r - 1], sk = k.shape()[r - 2], dv = v.shape()[r - 1];
    int64_t batches = numel_of(std::vector<int64_t>(qs.begin(), qs.end() - 2));
    std::vector<int64_t> scores_shape(qs.begin(), qs.end() - 2);
    scores_shape.push_back(sq);
    scores_shape.push_back(sk);
    std::vector<int64_t> mask_at = mask ? broadcast_index_map(mask->shape(), scores_shape) : std::vector<int64_t>{};
    std::vector<double> s(static_cast<size_t>(sk));
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t i = 0; i < sq; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < sk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q.get_f64((b * sq + i) * d + e) * k.get_f64((b / groups * sk + j) * d + e);
          double x = dot * scale;
          if (mask) {
            int64_t m = mask_at[static_cast<size_t>((b * sq + i) * sk + j)];
            x = mask->dtype() == DType::boolean ? (mask->get_i64(m) ? x : fill) : x + mask->get_f64(m);
          }
          s[j] = x;
          max = std::isnan(x) || x > max ? x : max; // a NaN score makes the row NaN
        }
        double sum = 0;
        for (int64_t j = 0; j < sk; ++j)
          sum += s[j] = std::exp(s[j] - max);
        for (int64_t e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j)
            acc += s[j] * v.get_f64((b / groups * sk + j) * dv + e);
          out.set_f64((b * sq + i) * dv + e, acc / sum);
        }
      }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_attention_ops(OpRegistry &registry) { registry.add(attention_op()); }

} // namespace maxc
