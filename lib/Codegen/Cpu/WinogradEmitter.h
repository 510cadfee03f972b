// Winograd F(m,3) convolution for the CPU code generator (m = 4 or 2, from
// winograd_tile in LoweringPlan.h): the convs of conv_winograd_shape (3x3,
// stride 1, dilation 1, one group, f32, >= 32 channels) whose weights are
// known at compile time.
//
// Per image, with tiles of m x m outputs (TH = ceil(OH/m) by TW = ceil(OW/m),
// T = TH*TW tiles) and a x a input patches d (a = m + 2; zeros outside the
// input):
//  1. V[e][c][t] = (Bᵀ d B)[e] for each channel c and tile t (e: the a*a
//     elements of the transform), tasks over channels: each channel is
//     copied into the task's zero-padded plane (no bounds checks), then each
//     tile row runs in chunks of `lanes` tiles as vector lanes (strided
//     loads as two wide loads and shuffles);
//  2. M[e] = U[e] @ V[e] for each e: a*a GEMMs [O, C] x [C, T] through
//     the GEMM emitter (Cpu/GemmEmitter.h);
//  3. Y = Aᵀ M A per (o, chunk of tiles), vectors across tiles; each output
//     row's columns interleaved and stored at once (masked at the right
//     edge), then the plan's epilogue (bias, activation, residual...) on
//     them, tasks over output channels.
// U[e][o][c] = (G g Gᵀ)[e] is computed at compile time (winograd_weights,
// in double, stored f32). V, M and the planes live in the conv's scratch
// slot (winograd_plan sizes it).
#pragma once

#include "Cpu/ConvEmitter.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/WeightsSection.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {
class HostTensor;
}

namespace maxc::codegen {

/// U[e][o][c] (e = a*i + j of the a x a transform, a = m + 2) =
/// (G g[o][c] Gᵀ)[i][j] of F(m,3) for a [O, C, 3, 3] weight (any float
/// dtype), computed in double.
std::vector<float> winograd_weights(const HostTensor &w, int64_t m);

/// The key of constant `constant`'s F(m,3) weights in ConstantOffsets.
std::string winograd_key(const std::string &constant, int64_t m);

/// The tile m of the Winograd convs that read input `input` of subgraph
/// `sub` (one per winograd_call_site_inputs entry); 0 if none.
int64_t winograd_input_tile(const Graph &sub, size_t input);

/// Per subgraph of `root` (by name): the inputs that also arrive as Winograd
/// weights from every call site: bound to a constant at every call
/// (constant_bound_inputs, Transforms/CallSites.h) and the weight of
/// conv2ds of conv_winograd_shape (LoweringPlan.h) that all take the same
/// tile. Sorted; the code generator
/// appends one buffer table entry per input, after the outputs.
std::map<std::string, std::vector<size_t>> winograd_call_site_inputs(const Graph &root);

/// The constants read only as Winograd weights (graph, constant name) -> m:
/// every use the weight of a conv2d that takes the Winograd kernel
/// (conv_winograd_shape and node_uses_gemm under `plans`) or an argument a
/// call binds to a winograd_call_site_inputs parameter whose own uses are
/// all such weights, one tile m for all; never a graph output. The weights
/// blob stores them transformed only (winograd_weights_rewrite): no kernel
/// reads the original values.
using WinogradOnly = std::map<std::pair<const Graph *, std::string>, int64_t>;
WinogradOnly plan_winograd_only(const Graph &root, const LoweringPlans &plans);

/// For weights_blob (WeightsSection.h): the Winograd weights in place of a
/// WinogradOnly constant's bytes, transformed on demand while the blob is
/// written (one constant's transform resident at a time).
ConstantRewrite winograd_weights_rewrite(const WinogradOnly &only);

/// Appends the Winograd weights of every constant they are made from to the
/// weights `blob` (64-byte aligned, after the constants), at
/// offsets[{graph, winograd_key(NAME, m)}]: constants read by a conv2d of
/// conv_winograd_shape in their own graph, and constants a call binds to a
/// winograd_call_site_inputs parameter. A constant of `only` (the blob
/// already holds its transform in its place, winograd_weights_rewrite) is
/// not appended: its key gets the constant's own offset. They are never LLVM
/// IR constants when the weights live in the object's weights section or an
/// external blob.
void append_winograd_weights(const Graph &root, ByteChunks &blob, ConstantOffsets &offsets,
                             const WinogradOnly &only = {});

struct WinogradArgs {
  ConvShape shape;
  WinogradPlan plan;        // winograd_plan of the conv
  llvm::Value *x, *u, *out; // one image of x and out; u: winograd_weights(w, plan.m)
  llvm::Value *scratch;     // plan.scratch_floats
  unsigned lanes;           // the GEMM's vector width
  std::string prefix;       // the model's symbol prefix
  const GemmEpilogue *epilogue; // optional: applied to each output, row o, column oy*OW + ox
};

void emit_winograd(llvm::IRBuilder<> &b, const WinogradArgs &args);

} // namespace maxc::codegen
