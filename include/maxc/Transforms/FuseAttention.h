// Attention recognition, applied during decompose() for backends that lower
// the `attention` op whole (DecomposeOptions::fuse_attention, the CPU): the
// spelled-out scaled dot-product attention
//
//   t = matmul(q, k, transpose_b)        JSON models (examples/gpt)
//     | matmul(q, transpose(x, perm))     ONNX torch exports (MatMul of a Transpose;
//                                         k = x permuted by perm with its last two swapped)
//   s = t * c | c * t | t / c            optional, c a scalar constant or full
//   x = where(mask, s, f) | where(mask, f, s)       optional, f a scalar
//     | s + mask | mask + s                         (where(mask, f, s): the
//                                                    attention gets not(mask))
//   p = softmax(x, axis = -1)
//   o = matmul(p, v)
//
// becomes o = attention(q, k, v[, mask]) {scale, fill}: every intermediate
// used once, f32, q, k and v with the same batch dims, the head dims D and
// Dv static. The intermediates (and a transpose of k read only there) are
// dropped, so no [Sq, Sk] scores are ever stored.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Transforms/Rewrite.h"

#include <map>
#include <optional>
#include <vector>

namespace maxc {

struct AttentionMatch {
  ValueId q, k, v;
  std::optional<ValueId> mask;
  bool mask_inverted = false; // where(mask, f, s): scores are kept where the mask is false
  /// k is k_source permuted by this (empty: k_source itself).
  std::vector<int64_t> k_perm;
  /// Grouped-query attention: k and v have 1/kv_groups of q's heads (their
  /// last batch dim); query head h reads kv head h / kv_groups.
  int64_t kv_groups = 1;
  double scale = 1.0, fill = 0.0;
  std::vector<size_t> inner; // the pattern's other nodes (not rebuilt)
};

/// The attention patterns of `g`, by the index of their final matmul.
/// `low_precision`: f16 and bf16 patterns too (one dtype throughout), for
/// backends whose attention kernel takes them (the GPU's, f32 accumulation).
/// `kv_groups`: k and v repeated over groups of heads (reshape(broadcast_to(
/// unsqueeze(x))), HF's repeat_kv) are matched as x with kv_groups > 1.
std::map<size_t, AttentionMatch> match_attention(const Graph &g, const Readers &readers, bool low_precision = false,
                                                 bool kv_groups = false);

/// Whether bool `mask` of an attention with q and k of these shapes keeps
/// exactly the scores with key j <= query i (then the kernel needs no mask
/// reads and skips the key blocks past the diagonal): ge(rows, cols) or
/// le(cols, rows) of iotas over [.., Sq, Sk]; a constant [.., Sq, Sk] with
/// that content; or not(constant) with the complement (torch's masked_fill
/// spelling, where(mask, f, s) above). The CPU kernel masks by index, so
/// such a mask read by nothing else is never computed (plan_lowering).
bool is_causal_mask(const Graph &g, ValueId mask, const Shape &q, const Shape &k);

} // namespace maxc
