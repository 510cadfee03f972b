// The CPU's recurrence kernel (f32; the op: maxc/Ops/Recurrence.h): one
// loop over the steps inside the graph function, no unrolling, so the
// length may be symbolic and compile time does not grow with it. Per step
// and batch row:
//   recurrent GEMV  g = x_t + h @ R^T, over R^T's column blocks of K
//     ([G*H/K, H, K], contiguous: one stream per block): K/W accumulator
//     vectors of W lanes stay in registers over the H rows of a block;
//   gates           one loop over the H columns in <W x float> vectors
//     (activations as inline polynomials, Codegen/MathEmitter), writing the
//     new h and c in place into Y_h / Y_c (the state) and the step's Y row.
// GRU without linear_before_reset runs two GEMVs (z|r, then (r*h) @ Rh^T).
// Odd steps walk R^T's blocks backwards, so a step starts on the blocks the
// previous one read last, still in cache (a 1 MB R cycled in one order
// through a 1 MB L2 would miss on every line). Single-threaded: splitting
// each step's GEMV into pool tasks (one per column block, tried in commit
// 883b665) measured no gain at 2 threads on the loaded 2-core VM and cost some
// at 1 thread.
#pragma once

#include "maxc/Ops/Recurrence.h"

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace maxc::codegen {

struct RecurrenceKernel {
  recurrence::Cell cell = recurrence::Cell::lstm;
  std::vector<recurrence::Activation> acts;
  bool reverse = false, input_forget = false, lbr = false;
  double clip = -1; // negative: none
  int64_t hidden = 0, block = 0;
  unsigned lanes = 8;
  llvm::Value *seq = nullptr, *batch = nullptr; // i64
  // float pointers: proj [S, B, G*H], r [G*H/K, H, K], y [S, B, H],
  // h and c [B, H] (the state, initialized by the caller; c: lstm),
  // p [3H] (lstm peepholes, or null), rbh [H] (gru linear_before_reset).
  llvm::Value *proj = nullptr, *r = nullptr, *y = nullptr, *h = nullptr, *c = nullptr, *p = nullptr,
              *rbh = nullptr;
  /// Scratch of the caller's entry block: g [G*H] floats, tmp [H] floats.
  llvm::Value *g = nullptr, *tmp = nullptr;
  /// With sequence lengths: i64 length of batch row `b` (else null).
  std::function<llvm::Value *(llvm::Value *b)> length;
  /// An entry-block local of type t (accumulators).
  std::function<llvm::Value *(llvm::Type *)> local;
};

/// Emits the whole recurrence at `b`'s insertion point.
void emit_recurrence_kernel(llvm::IRBuilder<> &b, const RecurrenceKernel &k);

} // namespace maxc::codegen
