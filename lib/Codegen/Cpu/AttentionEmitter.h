// Fused scaled-dot-product attention on the CPU (the `attention` op that
// Transforms/FuseAttention recognizes), flash-attention style: for each
// query row, one pass over the keys with an online softmax — running max m,
// running sum l and an output accumulator acc[Dv] rescaled by exp(m_old -
// m_new) when the max grows — so the [Sq, Sk] scores and probabilities are
// never stored (no workspace at all). Keys go in blocks of 16: each score
// q·k (f32, the dot vectorized) times scale, the mask applied (bool: fill
// where false; float: added) into a 16-float local array; then the block's
// max, one rescale c of l and acc, the block's p_j = exp(s_j - m) in one
// vectorizable loop, acc = acc * c + sum p_j v_j. The result is acc / l. A
// row whose scores are all -inf gives NaN (0 / 0), as the reference.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>

namespace maxc::codegen {

struct AttentionKernel {
  llvm::Value *sq = nullptr, *sk = nullptr; // i64: query rows, keys
  int64_t d = 0, dv = 0;                   // head dims of q/k and v (static)
  double scale = 1, fill = 0;
  /// f32 elements of this batch's q [Sq, D], k [Sk, D], v [Sk, Dv].
  std::function<llvm::Value *(llvm::Value *row, llvm::Value *col)> q, k, v;
  /// The mask at (i, j): i1 (bool mask) or f32 (added); empty: none.
  std::function<llvm::Value *(llvm::Value *i, llvm::Value *j)> mask;
  std::function<void(llvm::Value *row, llvm::Value *col, llvm::Value *y)> store;
  std::function<void(llvm::Value *n, const std::function<void(llvm::Value *)> &body)> loop;
  std::function<llvm::Value *(llvm::Type *)> local;
};

/// Emits the attention of one batch entry at `b`'s insertion point.
void emit_attention_kernel(llvm::IRBuilder<> &b, const AttentionKernel &a);

} // namespace maxc::codegen
