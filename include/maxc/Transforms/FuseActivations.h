// Activations and softmax written out op by op (torch at opsets without the
// op, tf2onnx, paddle2onnx, hand-written model code) recognized as the one op
// maxc has for them (gelu, silu, softmax): rewrite patterns (Rewrite.h) that
// the canonicalization list runs after its algebraic rules. The spellings
// each accepts, and the tolerance on their constants, are listed in
// FuseActivations.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

#include <vector>

namespace maxc {

/// The gelu (erf and tanh forms), silu and softmax patterns.
const std::vector<const RewritePattern *> &activation_patterns();

/// The relative tolerance with which a pattern accepts a constant as the one
/// it expects (1/√2 written as 0.70710677 or as a division by 1.4142135):
/// 1e-6 for f32 and f64 (every exporter's f32 rounding passes, 0.7071 does
/// not); for f16 (5e-4) and bf16 (4e-3) half an ulp, so the ideal constant
/// rounded to the dtype passes and its neighbour does not.
double constant_tolerance(DType dtype);

} // namespace maxc
