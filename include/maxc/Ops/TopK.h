// top_k: the k first elements of each row (the last axis) and their
// indices, in order — largest first (or smallest first), ties by the lower
// index first; NaN counts as larger than every number. ONNX TopK with the
// axis moved last.
//
// The CPU lowers it whole (a selection per row in its runtime,
// DecomposeOptions::keep_top_k, f32); other backends get top_k_primitives:
// a ranking (each element's rank counted by an [n, n] comparison, then a
// one-hot select per output position), over chunks of at most
// kTopKRankLimit elements when the row is longer (each chunk's k first,
// then the k first of those: the same result).
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/IR/Dim.h"
#include "maxc/Tensor/Tensor.h"

#include <cstdint>
#include <vector>

namespace maxc {

inline constexpr const char *kTopKOp = "top_k";
/// The decomposed form ranks at most this many elements at once.
inline constexpr int64_t kTopKRankLimit = 4096;

namespace ops {
/// {values, indices (i64)} of x's last axis' k first; k a dim (a symbol
/// bound at run time allowed, at most the axis' size).
std::vector<Tensor> top_k(const Tensor &x, const Dim &k, bool largest = true);
/// The primitives decompose() rewrites top_k into (see above). Throws
/// maxc::Error (InvalidGraph) for a row longer than kTopKRankLimit whose k
/// is symbolic or too large for chunks. `rank_limit` replaces
/// kTopKRankLimit (tests chunk short rows with a small one).
std::vector<Tensor> top_k_primitives(const std::vector<Tensor> &in, const Attrs &attrs,
                                     int64_t rank_limit = kTopKRankLimit);
} // namespace ops

} // namespace maxc
