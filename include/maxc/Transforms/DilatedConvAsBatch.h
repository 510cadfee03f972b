// A dilated 3x3 conv as an undilated one over a batch of subsampled images
// (TensorFlow's SpaceToBatchND / BatchToSpaceND form): a rewrite pattern
// (Rewrite.h) that decompose applies last, after batch norms have folded
// into their convs, for a backend that asks (DecomposeOptions::
// dilated_conv_as_batch: the CPU, whose undilated 3x3 convs take
// Winograd). The rule and its conditions: DilatedConvAsBatch.cpp.
#pragma once

#include "maxc/Transforms/Rewrite.h"

namespace maxc {

const RewritePattern &dilated_conv_as_batch_pattern();

} // namespace maxc
