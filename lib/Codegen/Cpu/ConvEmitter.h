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
//
// Both split their work into tasks (im2col: (channel, kernel row) pairs; direct: groups,
// each task with a padded plane of its own), task functions of their own
// handed to the runtime's parallel_for (Cpu/Runtime.h).
#pragma once

#include "Cpu/GemmEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <array>
#include <functional>
#include <string>

namespace maxc::codegen {

/// One image's convolution geometry (all static).
struct ConvShape {
  int64_t C, H, W, O, KH, KW, OH, OW, groups;
  std::array<int64_t, 2> stride, dilation;
  std::array<int64_t, 4> pad; // top, left, bottom, right
};

/// cols[(c*KH + ky)*KW + kx, oy*OW + ox] = x[c, oy*sy - pt + ky*dy, ox*sx - pl + kx*dx]
/// (0 outside the input); x and cols point at one image / its matrix. The
/// (channel, kernel row) pairs are split into tasks (conv_task_split) run through the
/// runtime's parallel_for; `prefix` is the model's symbol prefix.
void emit_im2col_f32(llvm::IRBuilder<> &b, const ConvShape &s, llvm::Value *x, llvm::Value *cols,
                     const std::string &prefix);

struct DirectConvArgs {
  ConvShape shape;
  llvm::Value *x, *w, *bias, *out; // one image of x and out; bias may be null
  llvm::Value *plane;              // scratch: split[0] planes of plane_h * plane_w floats
  int64_t plane_h, plane_w;        // conv_direct_plane()
  std::array<int64_t, 2> split;    // conv_direct_split(): {tasks, groups per task}
  unsigned lanes;                  // the target's f32 vector width
  std::string prefix;              // the model's symbol prefix
  /// Optional: the plan's chain on each finished output row, apply(b, acc,
  /// o, oy * OW + ox), inside the task (captures/enter/leave as for a GEMM).
  const GemmEpilogue *epilogue;
};

/// Tasks of `split[1]` groups each (a plane of their own), through the
/// runtime's parallel_for.
void emit_conv_direct_f32(llvm::IRBuilder<> &b, const DirectConvArgs &args);

} // namespace maxc::codegen
