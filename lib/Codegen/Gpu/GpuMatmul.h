// Matmul (and conv2d as an implicit GEMM) on matrix cores: MFMA on
// CDNA2/3 (gfx90a, gfx94x), WMMA on RDNA3 (gfx11xx), mma.sync on NVIDIA
// sm_80+ (tensor cores), for the GEMMs of the
// GPU kernel generator (GpuKernelEmitter.h) whose dtype the arch's matrix
// instructions take; every other GEMM keeps the scalar LDS-tiled kernel.
//
// Kernel: a 64 x 64 output macro-tile per workgroup of 256 work-items,
// K in tiles of 16 (f32) or 32 (f16/bf16: 16 bytes per work-item and
// operand either way, one 128-bit load where contiguous) staged through
// double-buffered LDS (zeros outside the matrix, so edge tiles need no
// second kernel; stores are masked). The workgroup's waves
// split the macro-tile (gfx9: 4 waves of 64 lanes, 2 x 2, each 32 x 32 =
// 2 x 2 blocks; gfx11: 8 waves of 32 lanes, 4 x 2, each 16 x 32 = 1 x 2
// blocks), one 16 x 16 f32 accumulator block per instruction:
//   f32  gfx9   v_mfma_f32_16x16x4f32        (K 4, 1 operand per lane)
//   f16  gfx9   v_mfma_f32_16x16x16f16       (K 16, 4 halves per lane)
//   bf16 gfx9   v_mfma_f32_16x16x16bf16_1k   (K 16, 4 bf16 per lane)
//   f16  gfx11  v_wmma_f32_16x16x16_f16      (K 16, 16 halves per lane)
//   bf16 gfx11  v_wmma_f32_16x16x16_bf16     (K 16, 16 bf16 per lane)
//   f16  sm_80+ 2 x mma.sync m16n8k16 f32.f16   (K 16, 8 halves per lane)
//   bf16 sm_80+ 2 x mma.sync m16n8k16 f32.bf16  (K 16, 8 bf16 per lane)
// NVIDIA (warps of 32, 8 per workgroup, 4 x 2, each 16 x 32 = 1 x 2 blocks)
// takes the same kernel: f32 (and f16/bf16 before sm_80) the scalar 4 x 4
// micro-tile, so every sm of a build launches the same grid.
// Per K-tile t, after a barrier: stage tile t + 1 (global → the other LDS
// buffer) and fragments of tile t (LDS → each lane's operand registers in
// the instruction's lane layout) in one phase, then the wave's matrix
// instructions (a KernelStep with wave_ops, no barrier). The lane operands
// and accumulators live at fixed offsets of the work-item's private state
// (one vector type per slot, so SROA keeps them in registers/AGPRs).
//
// The host emulation (GpuLowering.cpp, emulation target) runs a wave op
// for all lanes of each wave together, reading every operand from the lane
// and element where the instruction's documented layout says it is
// (emulate_wave_mma below, written from the inverse of the layout the
// kernel uses), so the emulator checks the layout, not a simplification.
#pragma once

#include "Gpu/GpuKernelEmitter.h"
#include "maxc/IR/DType.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <string>

namespace maxc::codegen {

enum class MatrixInstruction : int {
  none = 0,
  mfma_f32_16x16x4f32,
  mfma_f32_16x16x16f16,
  mfma_f32_16x16x16bf16_1k,
  wmma_f32_16x16x16_f16,
  wmma_f32_16x16x16_bf16,
  // NVIDIA sm_80+: two mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.f32
  // with the same A (columns 0-7, then 8-15 of the 16 x 16 block).
  mma_m16n8k16_f16_x2,
  mma_m16n8k16_bf16_x2,
};

/// A matrix instruction and its shape: a 16 x 16 f32 block += (16 x k) * (k x 16).
struct MatrixCore {
  MatrixInstruction instruction = MatrixInstruction::none;
  unsigned wave = 64;    // lanes of the wave that executes it together
  unsigned k = 4;        // the K of one instruction
  unsigned elements = 1; // A (and B) operand elements per lane
  unsigned results = 4;  // accumulator floats per lane
  DType operand = DType::f32;
  explicit operator bool() const { return instruction != MatrixInstruction::none; }
};

/// An NVIDIA arch's compute capability ("sm_90a": 90; 0: not "sm_<digits>").
int nvidia_sm(const std::string &arch);

/// The matrix instruction for GEMMs of dtype `d` on `arch` (none: scalar kernel).
MatrixCore matrix_core_for(const std::string &arch, DType d);
MatrixCore matrix_core_of(int instruction);

/// What the matrix-core GEMM needs of the kernel generator: phases and loop
/// steps of the kernel being built, and its builder (KernelBuilder).
class GemmPhaseBuilder {
public:
  virtual ~GemmPhaseBuilder() = default;
  virtual llvm::IRBuilder<> &gemm_builder() = 0;
  virtual GpuKernel &gemm_kernel() = 0;
  virtual llvm::Function *gemm_begin_phase() = 0;
  virtual KernelStep gemm_end_phase(llvm::Function *fn) = 0;
  virtual KernelStep gemm_loop_step(const Dim &extent, int64_t divisor, std::vector<KernelStep> body) = 0;
  virtual llvm::Value *gemm_dim(const Dim &d) = 0;
  /// Phase arguments: workgroup, local id, LDS, private state, iteration.
  virtual llvm::Value *gemm_workgroup() = 0;
  virtual llvm::Value *gemm_local_id() = 0;
  virtual llvm::Value *gemm_lds() = 0;
  virtual llvm::Value *gemm_state() = 0;
  virtual llvm::Value *gemm_iteration() = 0;
  virtual llvm::Value *gemm_when(llvm::Value *cond, const std::function<llvm::Value *()> &then, llvm::Value *otherwise) = 0;
  virtual void gemm_if(llvm::Value *cond, const std::function<void()> &then) = 0;
};

/// C[b, i, j] = sum_k A(b, i, k) * B(b, k, j) over a batch of M x N outputs.
/// The loaders are called only in bounds and return values of the
/// accumulation type; store gets the final accumulator.
struct GemmSpec {
  Dim batch, m, n, k;
  DType dtype = DType::f32;
  llvm::Type *acc_type = nullptr;
  std::function<llvm::Value *(llvm::Value *b, llvm::Value *i, llvm::Value *k)> load_a;
  std::function<llvm::Value *(llvm::Value *b, llvm::Value *k, llvm::Value *j)> load_b;
  std::function<void(llvm::Value *b, llvm::Value *i, llvm::Value *j, llvm::Value *acc)> store;
};

/// The matrix-core kernel's phases, grid, LDS and state (begin_kernel done).
/// Without a matrix instruction: `micro` x `micro` outputs per work-item, a
/// 16 micro square macro-tile (4: 64 x 64; 8: 128 x 128).
void emit_matrix_core_gemm(GemmPhaseBuilder &kb, const GemmSpec &gm, const MatrixCore &mc, unsigned micro = 4);

/// The scalar micro-tile side for GEMMs of dtype `d` on `arch`: 8 for f32
/// on NVIDIA (128 x 128 per block), 4 elsewhere; the same for every arch of
/// one vendor, so a build's archs share grids.
unsigned scalar_micro_tile_for(const std::string &arch, DType d);

/// Whether an NVIDIA GEMM is big enough for the macro-tile kernel
/// (nvidia_min_macro_tiles, GpuModelCompiler.h); the same answer for every
/// sm of a build, so its sms share grids.
bool nvidia_gemm_fills_macro_tiles(const GemmSpec &gm, const std::string &arch);

/// Device: the wave op as its intrinsic, operands from the work-item's `state`.
void emit_device_wave_mma(llvm::IRBuilder<> &b, const WaveMma &op, llvm::Value *state);

/// Emulation: the wave op for the `mc.wave` lanes whose states start at
/// `lane_states` (lane l's at + l * state_bytes), by the instruction's
/// documented lane layout.
void emulate_wave_mma(llvm::IRBuilder<> &b, const WaveMma &op, llvm::Value *lane_states, uint64_t state_bytes);

} // namespace maxc::codegen
