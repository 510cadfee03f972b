// A register-blocked f32 GEMM in LLVM IR: C[M,N] = A[M,K] @ B[K,N], all
// row-major with leading dimensions lda/ldb/ldc.
//
// The microkernel keeps a 6 x (2 vectors) tile of C in registers and, for
// each k, broadcasts one A element per row and loads two vectors of B's row
// k: 12 FMAs per 2 loads + 6 broadcasts (the BLIS shape). Rows left over
// (M % 6) run the same vector tile four rows at once (when 4 or 5 are left)
// and then one row at a time; the last column panel,
// where N is not a multiple of the panel width, runs with masked vector loads
// and stores (no scalar edge loops). For M < 6 (GEMV-like, bandwidth-bound),
// and for M <= 64 with B's rows <= 512 floats apart (the pack is not
// amortized), the tiles read B in place instead of packing it. A B packed
// at compile time (a constant weight, GemmArgs::packed_b) is read as it is. `lanes` is the vector
// width in floats (16 for AVX-512, 8 for AVX2, 4 for NEON).
//
// Tasks are row blocks (a multiple of the 6-row tile, so a row's summation
// order is the same however the work is split: up to 48 rows with fewer
// than 8 column panels, else up to 252, A's rows x kc block sized for L2)
// times column panels, or times 8 groups of panels when A does not fit in
// that block as a whole; within a task the K blocks run outside the panel
// loop. They are handed to the runtime's parallel_for (Cpu/Runtime.h: the
// program's parallel-for, the artifact's pool, or a loop); a GEMM below 64K
// multiply-adds runs its tasks here. An optional epilogue (bias, activation, residual add...) rewrites each
// panel's rows once they are final, inside the panel's task.
#pragma once

#include "maxc/IR/DType.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <string>
#include <vector>

namespace maxc::codegen {

/// An epilogue: once C[i, j] is final (after the last K block of its
/// panel, while the panel's rows are in cache), C[i, j] = apply(C[i, j], i, j), in a loop
/// over the panel's rows and columns. Panels run in a task function of their
/// own (one per GEMM with an epilogue), so apply() may be called in another
/// function than the GEMM's caller: the values it needs from the caller go
/// through `captures` (i64 or ptr), enter() is called when emission moves
/// into the task (entry: a builder before the task entry block's terminator,
/// captured: the captures there) and leave() when it moves back. apply()
/// emits at `b`'s insertion point and leaves `b` after its code.
struct GemmEpilogue {
  std::vector<llvm::Value *> captures;
  std::function<void(llvm::IRBuilder<> &entry, const std::vector<llvm::Value *> &captured)> enter;
  std::function<void()> leave;
  std::function<llvm::Value *(llvm::IRBuilder<> &b, llvm::Value *acc, llvm::Value *row, llvm::Value *col)> apply;
};

struct GemmArgs {
  llvm::Value *a, *b, *c;          // base pointers (f32)
  llvm::Value *m, *n, *k;          // i64 extents
  llvm::Value *lda, *ldb, *ldc;    // i64 row strides, in elements
  unsigned lanes = 16;
  std::string prefix = {};         // the model's symbol prefix (for helpers and the parallel_for hook)
  const GemmEpilogue *epilogue = nullptr; // optional
  bool serial = false; // run the tasks here, one after another (for a caller that is itself a task)
  // With serial: tasks of all column panels and up to the A block's rows
  // (kABlockBytes per K block), so that each K block of A is read once into
  // L2 however narrow N is (a task's implicit-im2col block).
  bool whole_rows = false;
  // B packed at compile time in panel order (Cpu/GemmPanels.h: panel p of
  // NR = 2 * lanes columns at b + p * K * NR, row k at + k * NR, zeros past
  // N): read as it is, no packing step; ldb is not used.
  bool packed_b = false;
  // The packed panels' element type: f32, or f16 / bf16 for a weight whose
  // every value is one exactly (Cpu/GemmPanels.h: PackedWeights::narrow),
  // widened to f32 as each vector of B is loaded (vcvtph2ps with F16C or
  // AVX-512F, fcvtl on aarch64; bf16 a shift of its bits): half the weight
  // bytes, the same products and sums, so the same bits as f32 panels.
  DType b_dtype = DType::f32;
};

void emit_gemm_f32(llvm::IRBuilder<> &builder, const GemmArgs &args);

// The integer GEMM (Cpu/Int8GemmEmitter.cpp): C[M, N] (i32) = sum_k A[m, k]
// * B[k, n], A and B u8 or i8, exact (wrapping in i32 like ONNX's int32
// accumulator). B is packed at compile time (Cpu/GemmPanels.h: the integer
// layout, panels of 2 * lanes columns, groups of four rows, column sums).
// The microkernel keeps MR x 2 vectors of C's i32 in registers (AVX2: two
// partial sums per column, twice the lanes, added at the end) and, per
// group of four k, broadcasts four bytes of A per row and multiplies them
// with two vectors of B's bytes, summing each column's four products into
// its lane: vpdpbusd (u8 x i8) with VNNI, vpmaddwd on bytes widened to i16
// with AVX2, widened products otherwise (Codegen/Target.h: cpu_int8_dot).
// Signedness: vpdpbusd multiplies unsigned by signed bytes; u8 x i8 and i8
// x u8 map to it as they are (B as the unsigned operand for the latter);
// for u8 x u8 and i8 x i8 A's bytes are flipped (xor 0x80: a - 128 as i8,
// a + 128 as u8) and the result corrected by +-128 * sum_k B[k, n] (the
// packed column sums). Tasks: blocks of rows times column panels, through
// the runtime's parallel_for (one after another below 64K multiply-adds).
// An integer GEMM's own write-back in place of C's i32 stores (the integer
// conv's requantization on each finished tile: no i32 round trip through
// memory). The task function (one of its own) gets `captures` through its
// arguments and calls enter(entry, captured) once at its entry; for each of
// a tile's rows, store(b, row, col0, count, sums): `sums` an i32 array of
// the row's `count` (<= 2 * lanes, the columns past N left out) finished
// sums, columns col0..; leave() after the task's code.
struct Int8GemmStore {
  std::vector<llvm::Value *> captures;
  std::function<void(llvm::IRBuilder<> &entry, const std::vector<llvm::Value *> &captured)> enter;
  std::function<void(llvm::IRBuilder<> &b, llvm::Value *row, llvm::Value *col0, llvm::Value *count, llvm::Value *sums)>
      store;
  std::function<void()> leave;
};

struct Int8GemmArgs {
  llvm::Value *a, *b, *c; // A [M, K] row-major, K bytes apart; B packed; C [M, N] i32 row-major (null with store)
  llvm::Value *m;         // i64
  int64_t n = 0, k = 0;
  bool a_signed = false, b_signed = false;
  unsigned lanes = 16;    // i32 lanes per vector (cpu_vector_lanes)
  unsigned dot = 0;       // Codegen/Target.h: kInt8Dot*
  std::string prefix = {};
  const Int8GemmStore *store = nullptr; // optional: the write-back instead of C
  bool serial = false; // the tasks here, one after another (a caller that is itself a task)
  // A in groups of kConvInt8RowGroup (16) rows (Cpu/GemmPanels.h:
  // pack_conv_int8_weight; zeros past M's last group and past K) instead of
  // row-major. With VNNI, A signed and B unsigned, and a write-back, the
  // last column panel when N is not a multiple of it runs transposed: the
  // rows are the lanes (A's group of 16 rows and four k one vector), each
  // column's four bytes of B broadcast, so no lane computes a column past N
  // (a QDQ ResNet-18's layer4: 49 = 32 + 17 columns, 64 computed before).
  bool a_grouped = false;
};

void emit_gemm_i8(llvm::IRBuilder<> &builder, const Int8GemmArgs &args);

} // namespace maxc::codegen
