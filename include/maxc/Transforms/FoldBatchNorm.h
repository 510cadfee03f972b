// Batch-norm folding, applied during decompose(): an inference batch_norm
// whose input is a conv2d used only by it, with the conv's weight and bias
// and all four norm parameters graph constants, becomes part of the conv:
//   s = gamma / sqrt(var + eps),  W'[o] = W[o] * s[o],  b' = (b - mean) * s + beta
// computed in double at compile time and stored once in the weight's dtype
// (f32 or f64). The conv then runs as one GEMM whose epilogue adds b' (and
// whatever elementwise chain follows, e.g. relu); the norm's pass over the
// feature map disappears. Rounding: W' and b' are rounded once each, where
// the reference normalizes the conv's f32 output in double.
//
// Through subgraph calls: in a deduplicated block, a conv2d + batch_norm
// whose weight (and conv bias, else the norm's beta) are parameters of the
// block that only they read, and whose other norm parameters are constant at
// every call (bound to root constants, or constants of the block), folds per
// call site: each call passes its own W' and b' (computed from its
// constants, named "<constant>.bn_folded") in place of the weight and bias
// parameters, and the definition, still one function, runs conv2d(x, W', b')
// with no norm. The other norm parameters stay (unread) parameters.
// When the conv (one group) reads a depthwise 1x1 stride-1 conv without
// bias, used only there, whose weight d is such a parameter too (tf2onnx's
// SeparableConv2D with a 1x1 depthwise step, deduplicated), d folds in as
// well: W'[o, c] = W[o, c] * d[c] * s[o], the conv reads the depthwise
// conv's input, and the depthwise conv is gone from the definition (the
// canonicalize rule conv-of-channel-scale does this for constants).
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <map>
#include <string>
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

/// Whether `node` of `g` is a channel scale: a depthwise 1x1 conv2d (one
/// group per channel, weight [C, 1, 1, 1] of x's float dtype, stride 1, no
/// padding, not `exact`) of a rank-4 x with static C; bias allowed.
bool is_channel_scale(const Graph &g, const Node &node);

/// W[o, c, ..] * d[c] (a conv weight [O, C, ...] times a channel scale's
/// weight, C elements), computed in double, in W's dtype.
HostTensor scaled_by_channel(const HostTensor &w, const HostTensor &d);

/// A conv2d + batch_norm of a subgraph definition folded per call site.
struct CallSiteBatchNorm {
  size_t conv = 0, batch_norm = 0; // node indices in the definition
  size_t weight = 0;               // the input that carries W' (the conv's weight parameter)
  size_t bias = 0;                 // the input that carries b' (the conv's bias parameter, else the norm's beta)
  int64_t scale = -1;              // the depthwise 1x1 conv folded in too (node index), or -1
  size_t scale_weight = 0;         // its weight parameter (an input index)
};
using CallSiteBatchNorms = std::map<std::string, std::vector<CallSiteBatchNorm>>; // by subgraph name

/// The folds of every subgraph definition of `root` (called from the root
/// graph only, see constant_bound_inputs).
CallSiteBatchNorms plan_call_site_batch_norms(const Graph &root);

/// `operands` of call node `call` of `root` (of `callee`, with `folds`),
/// with each fold's W' and b', computed from this call's constants, in place
/// of the weight and bias parameters (as new sources of `ctx`).
std::vector<Tensor> fold_call_site_batch_norms(const Graph &root, const Node &call, const Graph &callee,
                                               const std::vector<CallSiteBatchNorm> &folds,
                                               std::vector<Tensor> operands, GraphRealizationContext &ctx);

} // namespace maxc
