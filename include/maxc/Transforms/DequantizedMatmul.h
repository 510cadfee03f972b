// matmul(a, B) with B an 8-bit constant dequantized per run (DequantizeLinear
// of an initializer, transposed or not) → matmul_nbits on the 8-bit codes: a
// rewrite pattern (Rewrite.h) of the canonicalization list. The rule and its
// conditions: DequantizedMatmul.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

namespace maxc {

const RewritePattern &dequantized_matmul_pattern();

} // namespace maxc
