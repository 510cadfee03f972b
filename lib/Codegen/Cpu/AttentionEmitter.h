// Fused scaled-dot-product attention on the CPU (the `attention` op that
// Transforms/FuseAttention recognizes), flash-attention style: an online
// softmax — running max m, running sum l and an output accumulator rescaled
// by exp(m_old - m_new) when the max grows — so the [Sq, Sk] scores and
// probabilities are never stored. Two forms:
//
// - emit_attention_function (below): the query-block kernel, used whenever
//   q, k, v and the mask are stored buffers (always, but for a fused
//   generator operand); queries in the vector lanes, split into tasks.
// - emit_attention_kernel: the per-row loop over blocks of 16 keys, reading
//   q, k, v, mask through callbacks (the elemental emitter), for the rest.
//   Keys go in blocks of 16: each score q·k (f32, the dot vectorized) times
//   scale, the mask applied (bool: fill where false; float: added) into a
//   16-float local array; then the block's max, one rescale c of l and acc,
//   the block's p_j = exp(s_j - m) in one vectorizable loop, acc = acc * c
//   + sum p_j v_j.
//
// The result is acc / l. A row whose scores are all -inf gives NaN (0 / 0),
// as the reference.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Transforms/FuseAttention.h"

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

/// The query-block kernel (the fast path, used when q, k, v and the mask are
/// stored buffers): a function of its own,
///   void NAME(ptr noalias q, ptr noalias k, ptr noalias v, ptr noalias mask,
///             ptr noalias out, i64 sq, i64 sk, i64 i_begin, i64 i_end,
///             i64 mask_row_stride, i64 mask_col_stride)
/// for one batch entry (q [sq, d], k [sk, d], v [sk, dv], out [sq, dv], all
/// row-major f32; mask: this entry's [sq, sk] view through the two strides,
/// in elements, 0 for a broadcast dim), computing query rows [i_begin,
/// i_end). Its pointer parameters are noalias, so the caller may be a task
/// function that loads them from a table without losing that fact.
///
/// Queries are the vector lanes (`lanes` of them per block): the block's q
/// rows are packed transposed and pre-scaled once ([d][lanes]); then per
/// block of `lanes` keys the scores are lanes x lanes FMAs over d (each k
/// element broadcast), the online softmax runs lane-wise (running max m,
/// sum l, the rescale c = exp(m_old - m_new), p = exp(s - m) with the vector
/// exp of MathEmitter) with no horizontal reductions, and acc[query][dv] +=
/// p * v with v rows as vectors (masked at a dv tail), acc in a stack tile.
/// No [sq, sk] buffer anywhere. Causal (keep j <= i): masked by index, and
/// with a fill of -1e4 or less (the usual -1e9, -inf, -FLT_MAX) the key
/// blocks past the block's last query are skipped.
/// The largest D and Dv the query-block kernel takes: its stack tiles are
/// lanes x D and lanes x Dv floats (64 KiB each at 1024).
constexpr int64_t kMaxBlockHeadDim = 1024;

struct AttentionFunction {
  enum class Mask { none, causal, boolean, additive };
  int64_t d = 0, dv = 0;
  unsigned lanes = 16;
  double scale = 1, fill = 0;
  Mask mask = Mask::none;
  bool mask_per_row = false; // the mask differs between query rows (else its row stride is ignored)
  /// Elements between consecutive rows of q, k and v (0: d, d, dv, packed;
  /// more for views into a wider buffer, such as the
  /// heads of a [seq, heads * d] projection).
  int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0;
};

llvm::Function *emit_attention_function(llvm::Module &m, const std::string &name, const AttentionFunction &a);

/// The same signature and result for a few query rows (a decode step): each
/// row on its own (emit_attention_kernel: the dot products vectorized over
/// d, p * v over dv), where the query-block kernel would fill one vector
/// lane of `lanes`. The caller picks it when a block has few rows.
llvm::Function *emit_attention_rows_function(llvm::Module &m, const std::string &name, const AttentionFunction &a);

} // namespace maxc::codegen
