// conv_transpose2d with stride == kernel (2x2 stride-2 upsampling) as one GEMM
// and a depth-to-space view: a rewrite pattern (Rewrite.h) of the
// canonicalization list. The rule and its conditions: ConvTransposeAsMatmul.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

namespace maxc {

const RewritePattern &conv_transpose_as_matmul_pattern();

} // namespace maxc
