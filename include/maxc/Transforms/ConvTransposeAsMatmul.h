// conv_transpose2d (one group, no dilation) as one GEMM and a depth-to-space
// view, plus shifted sums where windows overlap (kernel > stride) and a crop
// for padding: a rewrite pattern (Rewrite.h) of the
// canonicalization list. The rule and its conditions: ConvTransposeAsMatmul.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

namespace maxc {

const RewritePattern &conv_transpose_as_matmul_pattern();

} // namespace maxc
