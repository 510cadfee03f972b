// Winograd F(2,3) convolution for the CPU code generator: the convs of
// conv_winograd_shape (LoweringPlan.h: 3x3, stride 1, dilation 1, one group,
// f32, >= 32 channels) whose weights are known at compile time.
//
// Per image, with tiles of 2x2 outputs (TH = ceil(OH/2) by TW = ceil(OW/2),
// T = TH*TW tiles) and 4x4 input patches d (zeros outside the input):
//  1. V[e][c][t] = (Bᵀ d B)[e] for each channel c and tile t (e: the 16
//     elements of the 4x4 transform), tasks over channels;
//  2. M[e] = U[e] @ V[e] for e = 0..15: 16 GEMMs [O, C] x [C, T] through
//     the GEMM emitter (Cpu/GemmEmitter.h);
//  3. Y = Aᵀ M A per (o, t): 2x2 outputs, the plan's epilogue (bias,
//     activation, residual...) applied to each, tasks over output channels.
// U[e][o][c] = (G g Gᵀ)[e] is computed at compile time (winograd_f23_weights,
// in double, stored f32). V and M live in the conv's scratch slot
// (conv_uses_gemm sizes it for 16*(C+O)*T floats).
#pragma once

#include "Cpu/ConvEmitter.h"
#include "maxc/Codegen/WeightsSection.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {
class HostTensor;
}

namespace maxc::codegen {

/// U[e][o][c] (e = 4*i + j of the 4x4 transform) = (G g[o][c] Gᵀ)[i][j] for
/// a [O, C, 3, 3] weight (any float dtype), computed in double.
std::vector<float> winograd_f23_weights(const HostTensor &w);

/// Per subgraph of `root` (by name): the inputs that also arrive as Winograd
/// weights from every call site: bound to a constant at every call
/// (constant_bound_inputs, Transforms/MatmulLayout.h) and the weight of a
/// conv2d of conv_winograd_shape (LoweringPlan.h). Sorted; the code generator
/// appends one buffer table entry per input, after the outputs.
std::map<std::string, std::vector<size_t>> winograd_call_site_inputs(const Graph &root);

/// Appends the Winograd weights of every constant they are made from to the
/// weights `blob` (64-byte aligned, after the constants), at
/// offsets[{graph, NAME + ".winograd"}]: constants read by a conv2d of
/// conv_winograd_shape in their own graph, and constants a call binds to a
/// winograd_call_site_inputs parameter. They are never LLVM IR constants
/// when the weights live in the object's weights section or an external blob.
void append_winograd_weights(const Graph &root, ByteChunks &blob, ConstantOffsets &offsets);

struct WinogradArgs {
  ConvShape shape;
  llvm::Value *x, *u, *out; // one image of x and out; u: winograd_f23_weights
  llvm::Value *scratch;     // at least 16*(C+O)*T floats
  unsigned lanes;           // the GEMM's vector width
  std::string prefix;       // the model's symbol prefix
  const GemmEpilogue *epilogue; // optional: applied to each output, row o, column oy*OW + ox
};

void emit_winograd_f23(llvm::IRBuilder<> &b, const WinogradArgs &args);

} // namespace maxc::codegen
