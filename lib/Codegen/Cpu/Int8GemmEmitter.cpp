// The integer GEMM (Cpu/GemmEmitter.h: emit_gemm_i8).
#include "Cpu/GemmEmitter.h"
#include "EntryPointUtil.h"

#include "Cpu/GemmPanels.h"

#include "Cpu/Runtime.h"
#include "maxc/Codegen/Target.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <vector>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr unsigned kVectors = 2;         // NR = kVectors * lanes columns
constexpr int64_t kTilesPerTask = 8;     // rows per task: kTilesPerTask * MR
constexpr int64_t kParallelMacs = 1 << 16;
// With a_grouped, the tile's k loop prefetches A's line this many groups of
// k ahead (4 KB): a conv's weights stream from memory once per column panel
// (a QDQ ResNet-18's layer3 and layer4: 1.2-2.4 MB per conv), and the
// hardware prefetchers left the loop waiting on them (the run at 1 thread:
// 6.53 -> 6.08 ms; 48 to 160 groups ahead gave the same).
constexpr int64_t kPrefetchGroups = 64;

// MR: 8 rows with AVX512-VNNI at 16 lanes (16 accumulators of the 32
// registers; a divisor of the usual channel counts), 6 with VNNI on 8 lanes
// (16 registers), 3 with AVX2's pairs, 8 with aarch64's sdot/usdot (16 of
// NEON's 32 registers).
unsigned tile_rows(unsigned dot, unsigned lanes) {
  if (dot == kInt8DotSdot || dot == kInt8DotUsdot)
    return 8;
  return dot == kInt8DotVnni ? (lanes == 16 ? 8 : 6) : dot == kInt8DotAvx2 ? 3 : 4;
}

// The task's arguments: a, b, c, m, n, k, rows per task.
// With a write-back, its captures follow.
llvm::StructType *task_args_type(llvm::LLVMContext &c, const Int8GemmStore *store) {
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  std::vector<llvm::Type *> types = {ptr, ptr, ptr, i64, i64, i64, i64};
  if (store)
    for (Value *v : store->captures)
      types.push_back(v->getType());
  return llvm::StructType::get(c, types);
}

struct Kernel {
  llvm::IRBuilder<> &b;
  unsigned lanes, dot;
  bool a_signed, b_signed;
  Value *a, *bp, *c, *n, *k;
  llvm::IRBuilder<> &entry; // the task's entry block (allocas)
  const Int8GemmStore *store = nullptr;
  Value *store_buf = nullptr; // with store: a tile's sums, [MR][NR] i32
  bool a_grouped = false;     // Int8GemmArgs::a_grouped
  bool tiles_in_group = false; // with a_grouped: every tile's rows lie in one group of 16
  Value *col_buf = nullptr;   // with columns(): a row block's sums, [2 * lanes][NR] i32
  llvm::LLVMContext &ctx = b.getContext();

  bool b_unsigned() const { return !b_signed; }          // vpdpbusd's unsigned operand: B, else A
  bool flip() const { return a_signed == b_signed; }      // A's bytes xor 0x80
  int64_t correction() const { return !flip() ? 0 : a_signed ? -128 : 128; } // times sum_k B[k, n]

  llvm::FixedVectorType *ivec() { return llvm::FixedVectorType::get(b.getInt32Ty(), lanes); }
  // AVX2: each column's two vpmaddwd partial sums kept apart in the
  // accumulators (twice the lanes) until the tile's end.
  bool pairs() const { return dot == kInt8DotAvx2 && lanes == 8; }
  llvm::FixedVectorType *acc_type() { return llvm::FixedVectorType::get(b.getInt32Ty(), pairs() ? 2 * lanes : lanes); }
  /// An accumulator as C's lanes (the pairs summed).
  Value *finish(Value *acc) {
    if (!pairs())
      return acc;
    std::vector<int> even(lanes), odd(lanes);
    for (unsigned i = 0; i < lanes; ++i)
      even[i] = static_cast<int>(2 * i), odd[i] = static_cast<int>(2 * i + 1);
    return b.CreateAdd(b.CreateShuffleVector(acc, even), b.CreateShuffleVector(acc, odd));
  }
  llvm::FixedVectorType *bvec() { return llvm::FixedVectorType::get(b.getInt8Ty(), lanes * 4); }

  Value *i64(int64_t v) { return b.getInt64(v); }

  /// acc + (per lane l) sum_j u[4l + j] * s[4l + j], u's bytes unsigned,
  /// s's signed: vpdpbusd's arithmetic (wrapping i32 sums).
  Value *dot4(Value *acc, Value *u, Value *s) {
    if (dot == kInt8DotVnni) {
      auto id = lanes == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256;
      return b.CreateIntrinsic(id, {}, {acc, b.CreateBitCast(u, ivec()), b.CreateBitCast(s, ivec())});
    }
    Value *ub = b.CreateBitCast(u, bvec()), *sb = b.CreateBitCast(s, bvec());
    if (dot == kInt8DotUsdot) // I8MM: u8 x i8 as it is
      return b.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_usdot, {ivec(), bvec()}, {acc, ub, sb});
    if (dot == kInt8DotSdot) {
      // i8 x i8 only: u * s = (u - 128) * s + 128 * s, the second term as
      // -(-128 * s), each a sdot (wrapping i32 sums, as vpdpbusd's).
      auto sdot = [&](Value *a, Value *x, Value *y) {
        return b.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_sdot, {ivec(), bvec()}, {a, x, y});
      };
      Value *shifted = b.CreateXor(ub, llvm::ConstantInt::get(bvec(), 0x80));
      Value *minus = llvm::ConstantInt::get(bvec(), 0x80); // -128 as i8
      return b.CreateSub(sdot(acc, shifted, sb), sdot(llvm::Constant::getNullValue(ivec()), minus, sb));
    }
    if (dot == kInt8DotAvx2 && lanes == 8) {
      // Bytes widened to i16; vpmaddwd sums pairs (exact: 255 * 128 * 2 <
      // 2^31): each column's two partial sums side by side in the
      // accumulator (finish() adds them).
      auto *v32 = llvm::FixedVectorType::get(b.getInt16Ty(), 32);
      Value *uw = b.CreateZExt(ub, v32), *sw = b.CreateSExt(sb, v32);
      std::vector<int> lo(16), hi(16);
      for (int i = 0; i < 16; ++i)
        lo[i] = i, hi[i] = 16 + i;
      Value *p0 = b.CreateIntrinsic(llvm::Intrinsic::x86_avx2_pmadd_wd, {},
                                    {b.CreateShuffleVector(uw, lo), b.CreateShuffleVector(sw, lo)});
      Value *p1 = b.CreateIntrinsic(llvm::Intrinsic::x86_avx2_pmadd_wd, {},
                                    {b.CreateShuffleVector(uw, hi), b.CreateShuffleVector(sw, hi)});
      Value *both = b.CreateShuffleVector(p0, p1, [] {
        std::vector<int> all(16);
        for (int i = 0; i < 16; ++i)
          all[i] = i;
        return all;
      }());
      return b.CreateAdd(acc, both);
    }
    // Portable: products in i32, each lane's four summed.
    auto *wide = llvm::FixedVectorType::get(b.getInt32Ty(), lanes * 4);
    Value *prod = b.CreateMul(b.CreateZExt(ub, wide), b.CreateSExt(sb, wide));
    Value *sum = acc;
    for (unsigned j = 0; j < 4; ++j) {
      std::vector<int> idx(lanes);
      for (unsigned l = 0; l < lanes; ++l)
        idx[l] = static_cast<int>(4 * l + j);
      sum = b.CreateAdd(sum, b.CreateShuffleVector(prod, idx));
    }
    return sum;
  }

  /// acc[j][v] += the products of row j's four bytes `word` (i32) with B's
  /// group at `bgroup`.
  void step(std::vector<std::vector<Value *>> &acc, const std::vector<Value *> &words, Value *bgroup, unsigned nvec) {
    std::vector<Value *> bv(nvec);
    for (unsigned v = 0; v < nvec; ++v)
      bv[v] = b.CreateAlignedLoad(bvec(), b.CreateGEP(b.getInt8Ty(), bgroup, i64(v * lanes * 4)), llvm::Align(4));
    for (size_t j = 0; j < words.size(); ++j) {
      Value *w = flip() ? b.CreateXor(words[j], b.getInt32(0x80808080u)) : words[j];
      Value *av = b.CreateBitCast(b.CreateVectorSplat(lanes, w), bvec());
      for (unsigned v = 0; v < nvec; ++v)
        acc[j][v] = b_unsigned() ? dot4(acc[j][v], bv[v], av) : dot4(acc[j][v], av, bv[v]);
    }
  }

  Value *k4() { return b.CreateSDiv(b.CreateAdd(k, i64(3)), i64(4)); }

  /// With a_grouped: where row r's first four k are (its group of 16 rows
  /// at (r / 16) * K4 * 64, the row at (r % 16) * 4; each group of k 64
  /// bytes further).
  Value *grouped_row(Value *r) {
    Value *group = b.CreateMul(b.CreateMul(b.CreateLShr(r, 4), k4()), i64(4 * kConvInt8RowGroup));
    return b.CreateGEP(b.getInt8Ty(), a, b.CreateAdd(group, b.CreateMul(b.CreateAnd(r, i64(kConvInt8RowGroup - 1)), i64(4))));
  }

  /// The transposed kernel (VNNI, A signed, B unsigned, a_grouped, with a
  /// write-back): rows [row0, row0 + nv * lanes) of columns [0, cols) of
  /// panel p (cols < NR, static), the rows as the lanes: per group of four
  /// k, one vector of A per `lanes` rows and one broadcast of B's four
  /// bytes per column, in chunks of up to `width` columns (nv * width
  /// accumulators). The sums go to col_buf (row j at j * NR), then the
  /// write-back of the rows before r1 (A's rows past M, zeros, are computed
  /// and not written).
  void column_block(Value *row0, unsigned nv, Value *r1, Value *p, Value *panel, int64_t cols) {
    // Chunks of at most `width` columns (2 * 12 accumulators of the 32
    // registers at 16 lanes), all of about the same width: 17 columns as
    // 9 + 8, not 8 + 8 + 1 (a chunk of one column is two chains of
    // vpdpbusd, latency-bound, and one more pass over A).
    int64_t nr = kVectors * lanes, width = lanes == 16 ? 12 : 4;
    const int64_t chunks = (cols + width - 1) / width;
    auto *avec = llvm::FixedVectorType::get(b.getInt8Ty(), lanes * 4);
    Value *abase = grouped_row(row0);
    Value *vec_stride = b.CreateMul(k4(), i64(4 * kConvInt8RowGroup)); // the next group of 16 rows
    std::vector<Value *> arows(nv);
    for (unsigned v = 0; v < nv; ++v) // lanes rows each: lanes divides 16, row0 a multiple of lanes
      arows[v] = lanes == kConvInt8RowGroup ? b.CreateGEP(b.getInt8Ty(), abase, b.CreateMul(vec_stride, i64(v)))
                                            : grouped_row(b.CreateAdd(row0, i64(v * lanes)));
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      int64_t c0 = cols * chunk / chunks, cc = cols * (chunk + 1) / chunks - c0;
      std::vector<std::vector<llvm::AllocaInst *>> slots(nv, std::vector<llvm::AllocaInst *>(cc));
      for (auto &row : slots)
        for (auto &sl : row) {
          sl = entry.CreateAlloca(ivec());
          b.CreateStore(llvm::Constant::getNullValue(ivec()), sl);
        }
      emit_counted_loop(b, k4(), [&](Value *g) {
        std::vector<Value *> av(nv);
        for (unsigned v = 0; v < nv; ++v)
          av[v] = b.CreateAlignedLoad(
              avec, b.CreateGEP(b.getInt8Ty(), arows[v], b.CreateMul(g, i64(4 * kConvInt8RowGroup))), llvm::Align(4));
        Value *bgroup = b.CreateGEP(b.getInt8Ty(), panel, b.CreateMul(g, i64(nr * 4)));
        for (int64_t j = 0; j < cc; ++j) {
          Value *word = b.CreateAlignedLoad(b.getInt32Ty(), b.CreateGEP(b.getInt8Ty(), bgroup, i64((c0 + j) * 4)),
                                            llvm::Align(4));
          Value *bv = b.CreateVectorSplat(lanes, word);
          for (unsigned v = 0; v < nv; ++v)
            b.CreateStore(dot4(b.CreateLoad(ivec(), slots[v][j]), bv, av[v]), slots[v][j]);
        }
      }, "qgemm.cols.k.");
      // Lane l of column j's vector v is row v * lanes + l: to col_buf.
      std::vector<llvm::Constant *> offsets;
      for (unsigned l = 0; l < lanes; ++l)
        offsets.push_back(b.getInt64(static_cast<int64_t>(l) * nr));
      Value *lane_offsets = llvm::ConstantVector::get(offsets);
      for (unsigned v = 0; v < nv; ++v)
        for (int64_t j = 0; j < cc; ++j) {
          Value *at = b.CreateGEP(b.getInt32Ty(), col_buf, i64(static_cast<int64_t>(v) * lanes * nr + c0 + j));
          b.CreateMaskedScatter(b.CreateLoad(ivec(), slots[v][j]), b.CreateGEP(b.getInt32Ty(), at, lane_offsets),
                                llvm::Align(4));
        }
    }
    Value *left = b.CreateSub(r1, row0);
    Value *count = b.CreateSelect(b.CreateICmpSLT(left, i64(nv * lanes)), left, i64(nv * lanes));
    Value *col0 = b.CreateMul(p, i64(nr));
    emit_counted_loop(b, count, [&](Value *j) {
      store->store(b, b.CreateAdd(row0, j), col0, i64(cols), b.CreateGEP(b.getInt32Ty(), col_buf, b.CreateMul(j, i64(nr))));
    }, "qgemm.cols.store.");
  }

  /// Rows [r0, r1) (r0 a multiple of 2 * lanes) of panel p's first `cols`
  /// columns by column_block: blocks of 2 * lanes rows, then one of lanes.
  void columns(Value *r0, Value *r1, Value *p, Value *panel, int64_t cols) {
    Value *vectors = b.CreateSDiv(b.CreateAdd(b.CreateSub(r1, r0), i64(lanes - 1)), i64(lanes));
    Value *pairs = b.CreateSDiv(vectors, i64(2));
    emit_counted_loop(b, pairs, [&](Value *i) {
      column_block(b.CreateAdd(r0, b.CreateMul(i, i64(2 * lanes))), 2, r1, p, panel, cols);
    }, "qgemm.cols.");
    emit_if(b, b.CreateICmpNE(b.CreateSRem(vectors, i64(2)), i64(0)), [&] {
      column_block(b.CreateAdd(r0, b.CreateMul(pairs, i64(2 * lanes))), 1, r1, p, panel, cols);
    });
  }

  /// Rows [row0, row0 + rows) of C's column panel p (B's panel at `panel`,
  /// its column sums at `sums`).
  void tile(Value *row0, unsigned rows, Value *p, Value *panel, Value *sums) {
    unsigned nvec = kVectors;
    int64_t nr = kVectors * lanes;
    std::vector<std::vector<llvm::AllocaInst *>> slots(rows, std::vector<llvm::AllocaInst *>(nvec));
    for (auto &row : slots)
      for (auto &s : row) {
        s = entry.CreateAlloca(acc_type());
        b.CreateStore(llvm::Constant::getNullValue(acc_type()), s);
      }
    auto load_accs = [&] {
      std::vector<std::vector<Value *>> acc(rows, std::vector<Value *>(nvec));
      for (unsigned j = 0; j < rows; ++j)
        for (unsigned v = 0; v < nvec; ++v)
          acc[j][v] = b.CreateLoad(acc_type(), slots[j][v]);
      return acc;
    };
    auto store_accs = [&](const std::vector<std::vector<Value *>> &acc) {
      for (unsigned j = 0; j < rows; ++j)
        for (unsigned v = 0; v < nvec; ++v)
          b.CreateStore(acc[j][v], slots[j][v]);
    };
    std::vector<Value *> arow(rows);
    for (unsigned j = 0; j < rows; ++j)
      arow[j] = a_grouped && j > 0 && tiles_in_group ? b.CreateGEP(b.getInt8Ty(), arow[0], i64(4 * j))
                : a_grouped ? grouped_row(b.CreateAdd(row0, i64(j)))
                            : b.CreateGEP(b.getInt8Ty(), a, b.CreateMul(b.CreateAdd(row0, i64(j)), k));
    // Whole groups of four k: A's four bytes as one (unaligned) i32; grouped,
    // every group is whole (zeros past K).
    Value *groups = a_grouped ? k4() : b.CreateSDiv(k, i64(4));
    int64_t a_step = a_grouped ? 4 * kConvInt8RowGroup : 4;
    emit_counted_loop(b, groups, [&](Value *g) {
      auto acc = load_accs();
      std::vector<Value *> words(rows);
      for (unsigned j = 0; j < rows; ++j)
        words[j] = b.CreateAlignedLoad(b.getInt32Ty(), b.CreateGEP(b.getInt8Ty(), arow[j], b.CreateMul(g, i64(a_step))),
                                       llvm::Align(a_grouped ? 4 : 1));
      if (a_grouped) // A's line kPrefetchGroups groups of k ahead (read, keep in all levels, data)
        b.CreateIntrinsic(llvm::Intrinsic::prefetch, {b.getPtrTy()},
                          {b.CreateGEP(b.getInt8Ty(), arow[0], b.CreateMul(b.CreateAdd(g, i64(kPrefetchGroups)), i64(a_step))),
                           b.getInt32(0), b.getInt32(3), b.getInt32(1)});
      step(acc, words, b.CreateGEP(b.getInt8Ty(), panel, b.CreateMul(g, i64(nr * 4))), nvec);
      store_accs(acc);
    }, "qgemm.k.");
    // The last, partial group: A's 1-3 bytes there (B's rows past K are
    // zeros), read one at a time.
    Value *rem = a_grouped ? i64(0) : b.CreateSRem(k, i64(4));
    emit_if(b, b.CreateICmpNE(rem, i64(0)), [&] {
      auto acc = load_accs();
      std::vector<Value *> words(rows);
      Value *k0 = b.CreateMul(groups, i64(4));
      for (unsigned j = 0; j < rows; ++j) {
        llvm::AllocaInst *word = entry.CreateAlloca(b.getInt32Ty());
        b.CreateStore(b.getInt32(0), word);
        for (int64_t t = 0; t < 3; ++t)
          emit_if(b, b.CreateICmpSGT(rem, i64(t)), [&] {
            Value *byte = b.CreateLoad(b.getInt8Ty(), b.CreateGEP(b.getInt8Ty(), arow[j], b.CreateAdd(k0, i64(t))));
            Value *shifted = b.CreateShl(b.CreateZExt(byte, b.getInt32Ty()), static_cast<uint64_t>(8 * t));
            b.CreateStore(b.CreateOr(b.CreateLoad(b.getInt32Ty(), word), shifted), word);
          });
        words[j] = b.CreateLoad(b.getInt32Ty(), word);
      }
      step(acc, words, b.CreateGEP(b.getInt8Ty(), panel, b.CreateMul(groups, i64(nr * 4))), nvec);
      store_accs(acc);
    });
    // Correction, then C's rows (the lanes past N masked off).
    auto acc = load_accs();
    std::vector<int> lane_ids(lanes);
    for (unsigned l = 0; l < lanes; ++l)
      lane_ids[l] = static_cast<int>(l);
    for (unsigned v = 0; v < nvec; ++v) {
      Value *col = b.CreateAdd(b.CreateMul(p, i64(nr)), i64(v * lanes));
      Value *fix = nullptr;
      if (correction() != 0)
        fix = b.CreateShl(b.CreateAlignedLoad(ivec(), b.CreateGEP(b.getInt32Ty(), sums, i64(v * lanes)), llvm::Align(4)),
                          7);
      Value *left = b.CreateTrunc(b.CreateSub(n, col), b.getInt32Ty());
      llvm::Constant *ids = llvm::ConstantDataVector::get(
          ctx, llvm::ArrayRef<uint32_t>(std::vector<uint32_t>(lane_ids.begin(), lane_ids.end())));
      Value *mask = b.CreateICmpSLT(ids, b.CreateVectorSplat(lanes, left));
      for (unsigned j = 0; j < rows; ++j) {
        Value *x = finish(acc[j][v]);
        if (fix)
          x = correction() > 0 ? b.CreateAdd(x, fix) : b.CreateSub(x, fix);
        if (store) { // the tile's sums to the write-back's buffer (L1)
          b.CreateAlignedStore(x, b.CreateGEP(b.getInt32Ty(), store_buf, i64(j * nr + v * lanes)), llvm::Align(4));
          continue;
        }
        Value *at = b.CreateGEP(b.getInt32Ty(), c, b.CreateAdd(b.CreateMul(b.CreateAdd(row0, i64(j)), n), col));
        b.CreateMaskedStore(x, at, llvm::Align(4), mask);
      }
    }
    if (!store)
      return;
    // The write-back, one row at a time: its columns up to N.
    Value *col0 = b.CreateMul(p, i64(nr));
    Value *count = b.CreateSub(n, col0);
    count = b.CreateSelect(b.CreateICmpSLT(count, i64(nr)), count, i64(nr));
    emit_counted_loop(b, i64(rows), [&](Value *j) {
      store->store(b, b.CreateAdd(row0, j), col0, count, b.CreateGEP(b.getInt32Ty(), store_buf, b.CreateMul(j, i64(nr))));
    }, "qgemm.store.");
  }
};

// void <prefix>.gemm_i8.<lanes>.<dot>.<signs>(ptr args, i64 t): one block of
// rows of one column panel. Shared by the GEMMs of the same signedness.
llvm::Function *task_function(llvm::Module &m, const Int8GemmArgs &g) {
  std::string name = g.prefix + ".gemm_i8." + std::to_string(g.lanes) + "." + std::to_string(g.dot) + "." +
                     (g.a_signed ? "s" : "u") + (g.b_signed ? "s" : "u") + (g.store ? ".store" : "");
  if (llvm::Function *f = m.getFunction(name); f && !g.store)
    return f;
  llvm::LLVMContext &c = m.getContext();
  llvm::IRBuilder<> entry(c), b(c);
  llvm::Function *fn = create_task_function(m, name, entry, b); // with store: one of its own (renamed)
  llvm::StructType *st = task_args_type(c, g.store);
  auto field = [&](unsigned i, llvm::Type *t) { return task_arg(entry, st, fn->getArg(0), i, t); };
  Value *a = field(0, b.getPtrTy()), *bp = field(1, b.getPtrTy()), *cp = field(2, b.getPtrTy());
  Value *mrows = field(3, b.getInt64Ty()), *n = field(4, b.getInt64Ty()), *k = field(5, b.getInt64Ty()),
        *rows = field(6, b.getInt64Ty());
  int64_t nr = kVectors * g.lanes;
  unsigned mr = tile_rows(g.dot, g.lanes);
  Kernel kern{b, g.lanes, g.dot, g.a_signed, g.b_signed, a, bp, cp, n, k, entry, g.store};
  kern.a_grouped = g.a_grouped;
  kern.tiles_in_group = kConvInt8RowGroup % mr == 0;
  // The last panel's columns when N is not a multiple of NR: transposed
  // (Kernel::columns), where it applies.
  int64_t last_cols = g.n % nr;
  bool transposed = g.store && g.a_grouped && g.dot == kInt8DotVnni && g.a_signed && !g.b_signed && last_cols != 0 &&
                    (kTilesPerTask * mr) % (2 * g.lanes) == 0;
  if (g.store) {
    std::vector<Value *> captured;
    for (unsigned i = 0; i < g.store->captures.size(); ++i)
      captured.push_back(field(7 + i, g.store->captures[i]->getType()));
    g.store->enter(entry, captured);
    kern.store_buf = entry.CreateAlloca(b.getInt32Ty(), b.getInt64(mr * nr));
    kern.store_buf->setName("qgemm.sums");
    if (transposed) {
      kern.col_buf = entry.CreateAlloca(b.getInt32Ty(), b.getInt64(2 * g.lanes * nr));
      kern.col_buf->setName("qgemm.col.sums");
    }
  }
  Value *panels = b.CreateSDiv(b.CreateAdd(n, b.getInt64(nr - 1)), b.getInt64(nr));
  Value *k4 = b.CreateSDiv(b.CreateAdd(k, b.getInt64(3)), b.getInt64(4));
  Value *t = fn->getArg(1);
  Value *p = b.CreateSRem(t, panels);
  Value *i0 = b.CreateMul(b.CreateSDiv(t, panels), rows);
  Value *i1 = b.CreateAdd(i0, rows);
  i1 = b.CreateSelect(b.CreateICmpSLT(i1, mrows), i1, mrows);
  Value *panel_bytes = b.CreateMul(k4, b.getInt64(nr * 4));
  Value *panel = b.CreateGEP(b.getInt8Ty(), bp, b.CreateMul(p, panel_bytes));
  Value *sums = b.CreateGEP(b.getInt8Ty(), bp,
                            b.CreateAdd(b.CreateMul(panels, panel_bytes), b.CreateMul(p, b.getInt64(nr * 4))));
  if (transposed) {
    auto *cols_bb = llvm::BasicBlock::Create(c, "qgemm.last", fn);
    auto *rows_bb = llvm::BasicBlock::Create(c, "qgemm.panel", fn);
    b.CreateCondBr(b.CreateICmpEQ(p, b.CreateSub(panels, b.getInt64(1))), cols_bb, rows_bb);
    b.SetInsertPoint(cols_bb);
    kern.columns(i0, i1, p, panel, last_cols);
    b.CreateRetVoid();
    b.SetInsertPoint(rows_bb);
  }
  Value *tiles = b.CreateSDiv(b.CreateSub(i1, i0), b.getInt64(mr));
  emit_counted_loop(b, tiles, [&](Value *i) {
    kern.tile(b.CreateAdd(i0, b.CreateMul(i, b.getInt64(mr))), mr, p, panel, sums);
  }, "qgemm.tile.");
  // The rows left over (< MR): tiles of 4, 2 and 1 rows, each at most once.
  llvm::AllocaInst *rest = entry.CreateAlloca(b.getInt64Ty());
  b.CreateStore(b.CreateAdd(i0, b.CreateMul(tiles, b.getInt64(mr))), rest);
  for (unsigned size = 4; size >= 1; size /= 2) {
    if (size >= mr)
      continue;
    Value *r0 = b.CreateLoad(b.getInt64Ty(), rest);
    emit_if(b, b.CreateICmpSGE(b.CreateSub(i1, r0), b.getInt64(size)), [&] {
      kern.tile(r0, size, p, panel, sums);
      b.CreateStore(b.CreateAdd(r0, b.getInt64(size)), rest);
    });
  }
  b.CreateRetVoid();
  if (g.store && g.store->leave)
    g.store->leave();
  return fn;
}

} // namespace

void emit_gemm_i8(llvm::IRBuilder<> &b, const Int8GemmArgs &args) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::Module &m = *fn->getParent();
  llvm::LLVMContext &c = m.getContext();
  int64_t nr = kVectors * args.lanes, panels = (args.n + nr - 1) / nr;
  int64_t rows = kTilesPerTask * tile_rows(args.dot, args.lanes);
  Value *m1 = b.CreateSelect(b.CreateICmpSGT(args.m, b.getInt64(0)), args.m, b.getInt64(0));
  Value *row_blocks = b.CreateSDiv(b.CreateAdd(m1, b.getInt64(rows - 1)), b.getInt64(rows));
  Value *tasks = b.CreateMul(row_blocks, b.getInt64(panels));
  Value *macs = b.CreateMul(m1, b.getInt64(args.n * args.k));
  std::vector<Value *> fields = {args.a, args.b, args.c ? args.c : llvm::ConstantPointerNull::get(b.getPtrTy()), m1,
                                 b.getInt64(args.n), b.getInt64(args.k), b.getInt64(rows)};
  if (args.store)
    fields.insert(fields.end(), args.store->captures.begin(), args.store->captures.end());
  Value *task_args = emit_task_args(b, task_args_type(c, args.store), fields);
  llvm::Function *task = task_function(m, args);
  if (args.serial) {
    emit_counted_loop(b, tasks, [&](Value *t) { b.CreateCall(task, {task_args, t}); }, "qgemm.task.");
    return;
  }
  auto *single = llvm::BasicBlock::Create(c, "qgemm.single", fn);
  auto *split = llvm::BasicBlock::Create(c, "qgemm.split", fn);
  auto *join = llvm::BasicBlock::Create(c, "qgemm.join", fn);
  b.CreateCondBr(b.CreateICmpSLT(macs, b.getInt64(kParallelMacs)), single, split);
  b.SetInsertPoint(single);
  emit_counted_loop(b, tasks, [&](Value *t) { b.CreateCall(task, {task_args, t}); }, "qgemm.task.");
  b.CreateBr(join);
  b.SetInsertPoint(split);
  emit_parallel_for(b, args.prefix, task_args, tasks, task, macs);
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

} // namespace maxc::codegen
