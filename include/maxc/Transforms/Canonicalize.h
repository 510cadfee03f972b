// Canonicalization: the compile step before decompose that rewrites the
// spellings people's exporters produce into the forms the planner and the
// fusion patterns know, with the rewrite driver (Rewrite.h). Each rule is a
// pattern of its own, listed here in the order the driver tries them, with
// how close its result is to the reference interpreter's on the original
// graph (test/unit/Transforms/CanonicalizeTest.cpp checks each bound on
// random inputs, and a near miss that must stay as it is):
//
//   pow-by-constant   pow(x, c), c a splat constant:        f32/f64/f16/bf16
//                       c = 1 → x, 0 → 1, 2 → x·x            bit-exact
//                       c = 3 → x·x·x                        ≤ 2 ulp
//                       c = 0.5 → sqrt(x), -0.5 → rsqrt(x)   ≤ 1 ulp (differs at -0 and -inf:
//                                                            pow gives +0 / +inf, sqrt -0 / NaN)
//                       c = -1 → 1/x                         bit-exact
//                     (torch writes LayerNorm/RMSNorm as Pow(x, 2) at
//                     opset < 17; a libm powf per element cost a quarter of
//                     a transformer's time.)
//   div-by-sqrt       x / sqrt(y) → x · rsqrt(y), the sqrt   ≤ 2 ulp
//                     read there only
//   div-by-constant   x / c → x · (1/c), c a float splat     bit-exact when 1/c is (c a power of
//                     (not 0, finite); where 1/c is inexact  two), else ≤ 1 ulp
//                     not for a one-element quotient nor one
//                     rounded to an integer (round, floor,
//                     ceil, cast to an integer), directly or
//                     within 4 elementwise steps (quantization)
//   identity          x·1, 1·x, x-0, x/1 → x; integer x+0    bit-exact
//   cast-chain        cast(x, dtype(x)) → x;                 bit-exact
//                     cast(cast(x, B), C) → cast(x, C) when every value of
//                     x's dtype is exact in B (f16→f32, i32→i64, bool→any...)
//   reshape-chain     reshape(reshape(x)) → one reshape;     bit-exact
//                     a reshape to x's own shape → x
//   transpose-chain   transpose(transpose(x, p), q) → one;   bit-exact
//                     an identity permutation → x
//   transpose-of-unit-dims  a transpose moving only dims of    bit-exact (no element moves)
//                     static size 1 (the others keep their order) → a reshape
//                     (tf2onnx's NHWC → NCHW of a 1-channel image)
//   transpose-of-split-of-transpose  transpose(split(         bit-exact (the same elements)
//                     transpose(x, p))[r], q), q undoing p →
//                     the slice of x that piece r is (tf2onnx's
//                     NHWC split between NCHW ops)
//   narrow-before-transpose  cast(f(transpose(x)), narrower  bit-exact (the same ops on the
//                     dtype) → transpose(cast(f(x))), f ≤ 16  same elements)
//                     elementwise ops each read once, their
//                     other operands one-element (a
//                     DynamicQuantizeLinear before an NHWC
//                     transpose): the transpose moves bytes
//   reshape-of-transpose  reshape(transpose(x, p)) →          bit-exact (a relabelling)
//                     transpose(reshape(x), p') when the
//                     reshape only splits axes (static sizes),
//                     the transpose read only there
//   elementwise-before-transpose  f(transpose(x), c...) →     bit-exact (the same ops on the
//                     transpose(f(x, c'...)) for any           same elements)
//                     elementwise op, c one element or a
//                     constant (c' transposed back), the
//                     transpose read once and moving the last
//                     axis, no GEMM/conv/composite reading f
//   conv-of-channel-scale  conv (one group) of a depthwise   the folded weights computed in
//                     1x1 stride-1 conv with constant weights  double: ≤ 1e-5 relative (not
//                     read there only → the conv with         bit-exact: one rounding fewer)
//                     W'[o,c] = W[o,c]·d[c], b' = b + W·e (the
//                     depthwise bias e only where the conv has
//                     no padding): tf2onnx's SeparableConv2D
//                     with a 1x1 depthwise step
//   conv-of-zero-pad  conv of a zero pad (value 0) of the    bit-exact (a padded tap reads
//                     spatial dims only, pads ≥ 0, read      the same zero)
//                     there only → the conv with those pads
//                     added to its padding (ORT's PadFusion;
//                     tf2onnx's explicit Pad before a strided conv)
//   conv-of-computed-weight  conv whose weight is computed   bit-exact (the reference ops on
//                     from constants through ≤ 16 elementwise  the same constants), unless the
//                     ops, generators and views (an 8-bit      CPU would have contracted a mul
//                     weight dequantized in the graph: Cast →  and an add into one FMA
//                     Mul → Add, ORT's weight quantizer) →
//                     the conv of that weight as a constant
//                     (up to 2^24 elements; 4 bytes each)
//   max-pool-of-zero-pad  max pool of a zero pad of the      bit-exact (a padded zero never
//                     spatial dims of a value never negative  beats the window's values)
//                     (relu, sigmoid, maximum with c >= 0, a
//                     minimum of such), read there only, the
//                     pads below the kernel → the pool with
//                     those pads added (Keras' ZeroPadding2D
//                     before MaxPooling2D)
//   constant-reshape  reshape/squeeze/unsqueeze of a         bit-exact (the same bytes)
//                     constant read there only (one reader, no
//                     other constant node of its name) → a
//                     constant of the new shape: a conv's or
//                     GEMM's weight is read where it lies, not
//                     copied each run (STFT-as-conv weights)
//   constant-fold     slice/concat/transpose/gather/pad      bit-exact (the same elements moved
//                     whose every operand is a constant      by the reference interpreter)
//                     → a constant (up to 2^24
//                     elements, its operands read there
//                     only; past 2^16 none that grows):
//                     an exporter's reordered weights (LSTM
//                     gates sliced and concatenated) are
//                     read where they lie, and packed
//   layer-norm        mean/sub/mul/mean/add/rsqrt/mul/add    the reference layer_norm (computed
//                     over trailing axes → layer_norm         in double): ≤ 1e-5 relative
//   rms-norm          x·rsqrt(mean(x·x)+eps)·w → rms_norm    likewise (FuseNorms.h)
//                     (with x = d - mean(d) and no + b after
//                     it: layer_norm without a bias)
//   gelu-erf          x·0.5·(1+erf(x/√2)) → gelu(x)           the reference op (in double) vs
//   gelu-tanh         x·0.5·(1+tanh(√(2/π)(x+0.044715x³)))    the spelled form rounded at each
//                     → gelu(x, "tanh")                       step: ≤ 1e-5 relative + 1e-6
//   silu              x·sigmoid(x) → silu(x)                  absolute (FuseActivations.h;
//   softmax           exp(x-max(x,a))/sum(…,a) → softmax(x,a) constants within 1e-6 relative)
//   hard-sigmoid      relu6(x+3)/6 [· x] → max(0, min(1,      ≤ 1e-5 relative + 1e-6 absolute
//                     x·(1/6)+0.5)) [· x], the importer's
//                     HardSigmoid / HardSwish
//   conv-transpose-as-matmul  conv_transpose2d (one group, no the sums of the reference in
//                     dilation) → one GEMM + depth-to-space    another order: f32 rounding
//                     view; overlapping windows (kernel >
//                     stride) add ≤ 16 shifted slices of it;
//                     padding / output padding crop / extend
//                     (ConvTransposeAsMatmul.h)
//   dequantized-matmul  matmul(a, [transpose](f32(i32(q) -    f32 rounding: the weights within
//                     i32(zp)) * s)), q an 8-bit constant,     1 ulp of each product (FMA of
//                     s/zp per tensor or per column, a ≤ 16    code·s − zp·s), the sums another
//                     static rows → matmul_nbits on the codes  order (DequantizedMatmul.h)
//
// A rule fires only where the node's result type stays exactly what it was
// (a broadcast that widens x keeps the node). An unchanged graph compiles to
// the same bytes: canonicalize returns null when no rule applies.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Transforms/Rewrite.h"

#include <memory>
#include <vector>

namespace maxc {

/// The canonicalization patterns, in the order the driver tries them.
const std::vector<const RewritePattern *> &canonicalization_patterns();

/// `graph` canonicalized (its subgraph bodies too), or null when no rule
/// applies anywhere.
std::unique_ptr<Graph> canonicalize(const Graph &graph, RewriteStats *stats = nullptr);

} // namespace maxc
