// Matmul operand layout, applied during decompose(): a transposed operand
// (transpose_a / transpose_b, and linear's [out, in] weights) becomes an
// explicit transpose, so the code generator only sees row-major matmuls
// (its GEMM kernel streams rows of B). Transposes of graph constants are
// folded at compile time — weights are stored pre-transposed, once — and
// others become a packing copy at run time (O(K·N) next to O(M·K·N)).
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <vector>

namespace maxc {

/// If `node` (of `from`) is a matmul with a transposed operand, records the
/// row-major equivalent into `ctx` and returns its result; else returns {}.
std::vector<Tensor> rewrite_matmul_layout(const Graph &from, const Node &node, const std::vector<Tensor> &operands,
                                          GraphRealizationContext &ctx);

/// The transpose of the last two dims of a constant, as a new constant of
/// `ctx`'s graph named "<name>.T" (stored once, however often it is used).
Tensor transposed_constant(const Graph &from, const std::string &name, GraphRealizationContext &ctx);

} // namespace maxc
