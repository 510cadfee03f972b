// Convolution kernels of the CPU code generator (f32, NCHW, static shapes
// but the batch), called per image by Cpu/KernelEmitter.cpp:
//
//  - emit_im2col_f32: the transposed column matrix of im2col + GEMM (single
//    group), written row by row: per (c, ky, kx, oy) one contiguous copy of
//    the valid input run (a memcpy at stride 1) and zero fills at the edges,
//    the valid range of ox computed at compile time for each kx.
//  - emit_conv_blocks_f32: implicit im2col + GEMM in one job: each task
//    packs the colsT columns of its block of output rows (kept in L2) and
//    multiplies them by the weights with the GEMM microkernel (a serial
//    GemmArgs::whole_rows GEMM), then runs the epilogue on its block.
//  - emit_conv_direct_f32: depthwise and grouped convolutions as a direct
//    vectorized window loop: each input channel is copied once into a
//    zero-padded plane (no bounds checks in the inner loop), then each
//    output row is computed in vectors of output columns, up to 8
//    independent accumulators, one FMA per (tap, vector); stride s loads s
//    vectors and keeps every s-th lane.
//  - emit_conv_depthwise_dynamic_f32: the depthwise case for a symbolic
//    height or width, with run-time lane masks.
//
// Both split their work into tasks (im2col: (channel, kernel row) pairs; direct: groups,
// each task with a padded plane of its own), task functions of their own
// handed to the runtime's parallel_for (Cpu/Runtime.h).
#pragma once

#include "Cpu/GemmEmitter.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/Graph.h"

#include <llvm/IR/IRBuilder.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

namespace maxc::codegen {

/// One image's convolution geometry (all static).
struct ConvShape {
  int64_t C, H, W, O, KH, KW, OH, OW, groups;
  std::array<int64_t, 2> stride, dilation;
  std::array<int64_t, 4> pad; // top, left, bottom, right
};

/// The geometry of conv2d `node` of `g` (static channel, spatial and kernel dims).
ConvShape conv_shape_of(const Graph &g, const Node &node);

/// cols[(c*KH + ky)*KW + kx, oy*OW + ox] = x[c, oy*sy - pt + ky*dy, ox*sx - pl + kx*dx]
/// (0 outside the input); x and cols point at one image / its matrix. The
/// (channel, kernel row) pairs are split into tasks (conv_task_split) run through the
/// runtime's parallel_for; `prefix` is the model's symbol prefix.
void emit_im2col_f32(llvm::IRBuilder<> &b, const ConvShape &s, llvm::Value *x, llvm::Value *cols,
                     const std::string &prefix);

/// emit_im2col_f32's matrix for one image on the calling thread (no
/// tasks), its rows `ld` floats apart: images side by side in one matrix
/// (the KernelEmitter's image groups).
void emit_im2col_serial_f32(llvm::IRBuilder<> &b, const ConvShape &s, llvm::Value *x, llvm::Value *cols,
                            llvm::Value *ld);

/// The run-time spatial sizes of a conv_is_symbolic_gemm conv (i64 values of
/// the calling function); its ConvShape's H, W, OH, OW are not used.
struct ConvRunTimeSize {
  llvm::Value *H, *W, *OH, *OW;
};

/// emit_im2col_f32 for a symbolic height or width: the same matrix (ld
/// OH*OW), the valid ox range of each kx computed at run time.
void emit_im2col_dynamic_f32(llvm::IRBuilder<> &b, const ConvShape &s, const ConvRunTimeSize &rt, llvm::Value *x,
                             llvm::Value *cols, const std::string &prefix);

/// conv2d (f32, one group, not pointwise) as implicit im2col + GEMM, one
/// image: conv_block_plan's tasks, each packing its rows' slice of colsT
/// into `cols` (scratch: blocks * K * rows * OW floats) and multiplying it
/// by the weights (a serial GEMM into `out`, [O, OH*OW]), then the epilogue
/// (bias and the plan's chain: apply(b, acc, o, oy * OW + ox)) on its block.
struct ConvBlockArgs {
  ConvShape shape;
  ConvBlockPlan plan;
  llvm::Value *x, *w, *out, *cols; // one image of x and out; w [O, C*KH*KW]
  unsigned lanes;
  std::string prefix = {};
  const GemmEpilogue *epilogue; // optional
};
void emit_conv_blocks_f32(llvm::IRBuilder<> &b, const ConvBlockArgs &args);

/// An integer conv (LoweringPlan.h: conv_uses_int8_gemm), one image: the
/// byte im2col of x (u8 or i8; the padding its zero point), packed as the
/// integer GEMM's B (Cpu/GemmEmitter.h: emit_gemm_i8) at run time, times the
/// weights packed at compile time (Cpu/GemmPanels.h: pack_conv_int8_weight)
/// as A, then out = f32(sum_k W[o, k] * (x - zp)), exact: the i32 sum
/// corrected by the offsets of the packed rows times the columns' sums
/// (made while packing) and by the zero point times the rows' sums, then the
/// optional epilogue (row o, column oy * OW + ox) — all in the GEMM's tile
/// write-back (Int8GemmStore), no i32 result in memory. Scratch:
/// conv_int8_scratch_bytes.
struct ConvInt8Args {
  ConvShape shape;
  llvm::Value *x, *zero_point, *w, *out, *scratch; // zero_point: its byte, or null (0)
  bool x_signed = false;
  unsigned lanes = 16, dot = 0;
  std::string prefix = {};
  const GemmEpilogue *epilogue = nullptr; // optional: applied to each f32 result
  /// out's element type: f32, or the 8-bit type of an epilogue's stored
  /// value (a requantization chain ending in a cast to u8/i8: LoweringPlan's
  /// epilogues); null: f32.
  llvm::Type *out_type = nullptr;
  /// Some row of the packed weight has an offset z[o] != 0
  /// (GemmPanels.h: conv_int8_weight_offsets): the columns' sums are needed.
  bool col_sums = true;
  /// A bound on |sum_k W[o, k] (x - zp)| when the weight is known (255 *
  /// the largest sum of |W| over a row); -1: unknown. At most 2^24, the
  /// sums' f32 carry it (FpRange.h), and the epilogue's cast back to i32 is
  /// the integer itself.
  int64_t sum_bound = -1;
};
void emit_conv_i8(llvm::IRBuilder<> &b, const ConvInt8Args &args);

struct DirectConvArgs {
  ConvShape shape;
  llvm::Value *x, *w, *bias, *out; // one image of x and out; bias may be null
  std::array<int64_t, 2> split;    // conv_direct_split(): {tasks, groups per task}
  unsigned lanes;                  // the target's f32 vector width
  std::string prefix = {};         // the model's symbol prefix
  /// Optional: the plan's chain on each finished output row, apply(b, acc,
  /// o, oy * OW + ox), inside the task (captures/enter/leave as for a GEMM).
  const GemmEpilogue *epilogue;
};

/// Tasks of `split[1]` groups each, through the
/// runtime's parallel_for.
void emit_conv_direct_f32(llvm::IRBuilder<> &b, const DirectConvArgs &args);

/// A depthwise conv (groups == C == O) of a symbolic height or width, one
/// image: the direct kernel's vectors of output columns with run-time lane
/// masks — each tap a masked load of its input row (lanes outside [0, W)
/// and rows outside [0, H) masked off: the zero padding, never read), one
/// FMA per tap, a masked store of the row's last vector. Tasks of channels.
struct DepthwiseDynamicArgs {
  ConvShape shape;          // C, KH, KW, stride, dilation, pad (H, W, OH, OW: unused)
  ConvRunTimeSize rt;       // the calling function's values
  llvm::Value *x, *w, *bias, *out; // one image of x and out; w [C, 1, KH, KW]; bias may be null
  unsigned lanes;
  std::string prefix = {};
};
void emit_conv_depthwise_dynamic_f32(llvm::IRBuilder<> &b, const DepthwiseDynamicArgs &args);

/// One image's max-pool geometry (all static).
struct PoolShape {
  int64_t C, H, W, OH, OW, KH, KW;
  std::array<int64_t, 2> stride;
  std::array<int64_t, 2> pad; // top, left (bottom / right follow from OH, OW)
};

/// f32 max_pool2d of `images` images (an i64 value; x and out hold them
/// one after another): one job, tasks over (image, band of output rows), all
/// channels each (a batch of small images is one job the pool can split,
/// not one job per image below its threshold) (conv_task_split over OH: a band reads the rows a
/// row-split producer made on the same core); per output row, the vertical
/// max of the window's input rows (whole vectors, straight from the input)
/// into a -inf-padded row buffer (task-local; channels in groups of 8, a
/// buffer each, all vertical passes of a group before its horizontal
/// ones: no load waits on a store it straddles), then vectors of `lanes`
/// output columns, one strided load (a wide load and a shuffle, shared by
/// taps kx with equal kx / stride) per tap; NaN wins as in the reference.
/// `input`: x's elements are f32, or u8 / i8 that the kernel widens to f32
/// as it loads them (a max pool of cast(x8, f32), the cast fused: a QDQ
/// model's MaxPool reads the bytes, a quarter of the f32 plane).
enum class PoolInput { f32, u8, i8 };
void emit_max_pool_f32(llvm::IRBuilder<> &b, const PoolShape &s, llvm::Value *images, llvm::Value *x, llvm::Value *out,
                       unsigned lanes, const std::string &prefix, PoolInput input = PoolInput::f32);

/// IR helpers shared by the convolution kernels (ConvEmitter.cpp,
/// WinogradEmitter.cpp); i64 arithmetic is nsw.
namespace conv_ir {
/// for (i = from; i < to; ++i) body(i), i64.
void for_range(llvm::IRBuilder<> &b, llvm::Value *from, llvm::Value *to,
               const std::function<void(llvm::Value *)> &body);
void for_count(llvm::IRBuilder<> &b, int64_t n, const std::function<void(llvm::Value *)> &body);
llvm::Value *f32_at(llvm::IRBuilder<> &b, llvm::Value *base, llvm::Value *index);
llvm::Value *mul(llvm::IRBuilder<> &b, llvm::Value *x, int64_t c);
llvm::Value *add(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y);
llvm::Value *add(llvm::IRBuilder<> &b, llvm::Value *x, int64_t c);
/// body(b, captured, t) for t in [0, tasks), each a call of a task function
/// `<prefix>.<name>` of its own: `fields` (pointers, i64) and the
/// epilogue's captures go through an entry-block struct; in the task,
/// `captured` holds the fields' copies, and the epilogue (if any) has been
/// entered (GemmEpilogue::enter) for the task's duration. `work`: all the
/// tasks' estimated work (emit_parallel_for; -1: unknown).
void emit_tasks(llvm::IRBuilder<> &b, const std::string &prefix, const std::string &name,
                const std::vector<llvm::Value *> &fields, int64_t tasks, int64_t work, const GemmEpilogue *epilogue,
                const std::function<void(llvm::IRBuilder<> &, const std::vector<llvm::Value *> &, llvm::Value *)> &body);
/// emit_tasks with a run-time task count and work (i64 values of the caller).
void emit_tasks(llvm::IRBuilder<> &b, const std::string &prefix, const std::string &name,
                const std::vector<llvm::Value *> &fields, llvm::Value *tasks, llvm::Value *work,
                const GemmEpilogue *epilogue,
                const std::function<void(llvm::IRBuilder<> &, const std::vector<llvm::Value *> &, llvm::Value *)> &body);
} // namespace conv_ir

} // namespace maxc::codegen
