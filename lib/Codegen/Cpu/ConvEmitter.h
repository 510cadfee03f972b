// Convolution kernels of the CPU code generator (f32, NCHW, static shapes
// but the batch), called per image by Cpu/KernelEmitter.cpp:
//
//  - emit_im2col_f32: the transposed column matrix of im2col + GEMM (single
//    group), written row by row: per (c, ky, kx, oy) one contiguous copy of
//    the valid input run (a memcpy at stride 1) and zero fills at the edges,
//    the valid range of ox computed at compile time for each kx.
//  - emit_conv_direct_f32: depthwise and grouped convolutions as a direct
//    vectorized window loop: each input channel is copied once into a
//    zero-padded plane (no bounds checks in the inner loop), then each
//    output row is computed in vectors of output columns, up to 8
//    independent accumulators, one FMA per (tap, vector); stride s loads s
//    vectors and keeps every s-th lane.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <array>
#include <functional>

namespace maxc::codegen {

/// One image's convolution geometry (all static).
struct ConvShape {
  int64_t C, H, W, O, KH, KW, OH, OW, groups;
  std::array<int64_t, 2> stride, dilation;
  std::array<int64_t, 4> pad; // top, left, bottom, right
};

/// cols[(c*KH + ky)*KW + kx, oy*OW + ox] = x[c, oy*sy - pt + ky*dy, ox*sx - pl + kx*dx]
/// (0 outside the input); x and cols point at one image / its matrix.
void emit_im2col_f32(llvm::IRBuilder<> &b, const ConvShape &s, llvm::Value *x, llvm::Value *cols);

/// A finished output element's final value (the plan's epilogue chain):
/// apply(b, acc, o, oy * OW + ox); emits at b's insertion point.
using ConvEpilogue = std::function<llvm::Value *(llvm::IRBuilder<> &b, llvm::Value *acc, llvm::Value *o,
                                                  llvm::Value *col)>;

struct DirectConvArgs {
  ConvShape shape;
  llvm::Value *x, *w, *bias, *out; // one image of x and out; bias may be null
  llvm::Value *plane;              // scratch: plane_h * plane_w floats
  int64_t plane_h, plane_w;        // conv_direct_plane()
  unsigned lanes;                  // the target's f32 vector width
  ConvEpilogue epilogue;           // optional
};

void emit_conv_direct_f32(llvm::IRBuilder<> &b, const DirectConvArgs &args);

} // namespace maxc::codegen
