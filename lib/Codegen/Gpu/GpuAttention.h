// Fused scaled dot-product attention on the GPU (the `attention` op that
// Transforms/FuseAttention recognizes; the GPU backends ask decompose() to
// keep it, codegen::gpu_decompose_options), flash-attention style, for
// every GPU target of the kernel generator (AMDGPU, NVPTX, the emulator).
//
// One kernel, one workgroup per (batch entry, block of Bq queries), 256
// work-items. The query block is staged in LDS once; then per block of Bk
// keys (a loop step, one trip per key block):
//   1. K and V rows of the block → LDS (zeros past the last key);
//   2. the Bq x Bk scores, each a D-long dot product from LDS, times the
//      scale, masked (causal by index, a bool mask → fill, a float mask
//      added), → LDS;
//   3. one work-item per query row: the online softmax update — the block's
//      max m', the rescale a = exp(m - m'), p = exp(s - m') in place of the
//      scores, the running sum l = l * a + sum p (m, l, a in LDS);
//   4. each work-item's share of the Bq x Dv output accumulators (private
//      state, f32): o = o * a + sum_j p_j * V[j].
// Finally o / l is stored. No [Sq, Sk] buffer exists anywhere, the
// accumulation is f32 (f16/bf16 operands widened on load), and with a
// causal mask whose fill is -1e4 or less (exp underflows to exactly 0) the
// key blocks past the block's last query do no work (their trips keep
// their barriers: a trip count is uniform over the grid). Bq = Bk = 16,
// halved while the LDS tiles would exceed 16 KiB (head dims above 64), so
// that 4 workgroups fit a gfx9 CU's 64 KiB: the occupancy that
// amdgpu-waves-per-eu 4 (at most 128 VGPRs) asks for.
#pragma once

#include "Gpu/GpuMatmul.h"

namespace maxc::codegen {

struct AttentionSpec {
  Dim batch, sq, sk; // batch entries (product of the batch dims), queries, keys
  int64_t d = 0, dv = 0;
  double scale = 1, fill = 0;
  bool causal = false; // keep key j <= query i, else `fill`
  /// Operand elements as f32 (called in bounds only).
  std::function<llvm::Value *(llvm::Value *b, llvm::Value *i, llvm::Value *e)> load_q, load_k, load_v;
  /// A non-causal mask applied to the scaled score s of (b, i, j) (null: none).
  std::function<llvm::Value *(llvm::Value *b, llvm::Value *i, llvm::Value *j, llvm::Value *s)> mask;
  /// Stores the f32 result of (b, i, c).
  std::function<void(llvm::Value *b, llvm::Value *i, llvm::Value *c, llvm::Value *v)> store;
};

/// The attention kernel's phases, grid, LDS and state (begin_kernel done).
void emit_attention(GemmPhaseBuilder &kb, const AttentionSpec &spec);

/// The query (= key) block size the kernel uses for head dims d and dv.
int64_t attention_block(int64_t d, int64_t dv);

} // namespace maxc::codegen
