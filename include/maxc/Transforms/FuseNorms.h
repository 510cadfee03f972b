// LayerNorm and RMSNorm written out op by op (torch at opset < 17, paddle2onnx,
// tf2onnx, Llama-style exports) recognized as layer_norm / rms_norm: rewrite
// patterns (Rewrite.h) that the canonicalization list runs after its
// algebraic rules. The spellings each accepts are listed in FuseNorms.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

#include <vector>

namespace maxc {

/// The layer-norm and rms-norm patterns.
const std::vector<const RewritePattern *> &norm_patterns();

} // namespace maxc
