// The CPU's weight-only quantized matmul (matmul_nbits, maxc/Ops/MatmulNbits.h):
// C[M, N] (f32) = A[M, K] (f32) @ dequant(B)^T, B's codes read in their 4 or
// 8 bits as MatMulNBits lays them out (the constant stays that small in the
// object) and dequantized in registers.
//
// GEMV-shaped (decode: M = 1..4 rows, memory-bound):
//   C[m, n] = sum_b s_b * (sum_{k in b} code_k * a_k) - sum_b z_b * s_b * asum_b
// For each column n, a block of K's codes is loaded (chunks of up to 32
// codes), unpacked (4 bits: the low and high nibbles), converted to f32 and
// multiplied into up to four rows of A at once, summed into one register
// per row, then scaled into the row's accumulator (one FMA per block); the
// zero points' share is a vector of 16 blocks at a time against A's block
// sums (asum_b, computed once per task and row). B is read once per four
// rows. From 16 rows of A on (prefill), a task dequantizes its 16 columns
// once into a [K][16] f32 panel (a column per lane, the codes gathered a
// 32-bit word at a time) and runs tiles of 8 rows x 16 columns, one
// broadcast FMA per row and k; K in slices of 1024 codes (a 64 KB buffer on
// the task's stack: a user's parallel-for may run tasks on small stacks),
// the tiles' sums stored after a slice and read back for the next (blocks
// of more than 1024 codes: groups of four rows on the codes). A's K tail past the
// last whole block is read with masked loads. Each output element is one
// column's sum in a fixed order: the same at any thread count.
//
// Tasks are groups of kColumnsPerTask columns (all rows), handed to the
// runtime's parallel_for (Cpu/Runtime.h).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <string>

namespace maxc::codegen {

struct NbitsGemvArgs {
  llvm::Value *a, *b, *scales, *zero_points, *c; // zero_points null: the default 2^(bits - 1)
  llvm::Value *m;                                // i64 rows of A and C
  int64_t k = 0, n = 0, bits = 4, block = 32;
  unsigned lanes = 16;
  std::string prefix = {};
};

void emit_matmul_nbits_kernel(llvm::IRBuilder<> &builder, const NbitsGemvArgs &args);

} // namespace maxc::codegen
