// Batch-norm folding, applied during decompose(): an inference batch_norm
// whose input is a conv2d used only by it, with the conv's weight and bias
// and all four norm parameters graph constants, becomes part of the conv:
//   s = gamma / sqrt(var + eps),  W'[o] = W[o] * s[o],  b' = (b - mean) * s + beta
// computed in double at compile time and stored once in the weight's dtype
// (f32 or f64). The conv then runs as one GEMM whose epilogue adds b' (and
// whatever elementwise chain follows, e.g. relu); the norm's pass over the
// feature map disappears. Rounding: W' and b' are rounded once each, where
// the reference normalizes the conv's f32 output in double.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <vector>

namespace maxc {

/// Index of the batch_norm node that folds into conv2d node `conv` of
/// `from`, or -1. `consumers[v]`: the nodes reading value v (a graph output
/// counts as a reader, index -1).
int64_t foldable_batch_norm(const Graph &from, size_t conv, const std::vector<std::vector<int64_t>> &consumers);

/// Records conv2d(x, W', b') (the attributes of `conv`) into `ctx`'s graph:
/// the batch_norm's result.
Tensor fold_batch_norm(const Graph &from, const Node &conv, const Node &batch_norm, const Tensor &x,
                       GraphRealizationContext &ctx);

} // namespace maxc
