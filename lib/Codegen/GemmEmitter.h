// A register-blocked f32 GEMM in LLVM IR: C[M,N] = A[M,K] @ B[K,N], all
// row-major with leading dimensions lda/ldb/ldc.
//
// The microkernel keeps a 6 x (2 vectors) tile of C in registers and, for
// each k, broadcasts one A element per row and loads two vectors of B's row
// k: 12 FMAs per 2 loads + 6 broadcasts (the BLIS shape). Rows and columns
// left over at the edges go through a scalar dot-product loop. `lanes` is
// the vector width in floats (16 for AVX-512, 8 for AVX2, 4 for NEON).
//
// Column panels are independent tasks: when the caller has installed a
// parallel_for (NAME_set_parallel_for), they run through it, else in a loop.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <string>

namespace maxc::codegen {

struct GemmArgs {
  llvm::Value *a, *b, *c;          // base pointers (f32)
  llvm::Value *m, *n, *k;          // i64 extents
  llvm::Value *lda, *ldb, *ldc;    // i64 row strides, in elements
  unsigned lanes = 16;
  std::string prefix;              // the model's symbol prefix (for helpers and the parallel_for hook)
};

void emit_gemm_f32(llvm::IRBuilder<> &builder, const GemmArgs &args);

} // namespace maxc::codegen
