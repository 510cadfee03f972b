#include "Cpu/GemmEmitter.h"
#include "EntryPointUtil.h"

#include "Cpu/Runtime.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <tuple>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr unsigned kRows = 6;    // MR
constexpr unsigned kVectors = 2; // NR = kVectors * lanes
// K blocks: B's kc x NR micro-panel is sized to the L1 data cache (default
// 32 KiB: kc = 256 at NR = 32 floats), re-read from L1 by every 6-row tile
// of the task. (Smaller blocks, half of L1, measured no faster here. See
// docs/PERFORMANCE.md.)
constexpr int64_t kL1Bytes = 32 * 1024;
// The task's block of A, rows x kc, is re-read by each of its column panels
// (K blocks run outside the panel loop): sized to a quarter of a 1 MiB L2
// (the C block of the task and B's micro-panels share the rest), 252 rows at
// kc = 256.
constexpr int64_t kABlockBytes = 256 * 1024;

// Tasks: row blocks (a multiple of MR rows, so that a row's tile, and with
// it its summation order, does not depend on the split) times groups of
// column panels, all decided from M, N and K alone (never from the thread
// count): with kEnoughPanels panels or more, all rows when A fits in
// kABlockBytes as a whole, else rows up to kABlockBytes of A per K block;
// with fewer panels to share out, up to kRowBlock rows (row blocks re-pack
// B's panel once per block); panels one per task, or, when A does not fit
// in kABlockBytes (it then streams from L3 once per group), kColumnGroups
// groups of panels. A GEMM below kParallelMacs
// multiply-adds runs its tasks on the calling thread.
constexpr int64_t kRowBlock = 8 * kRows;
constexpr int64_t kParallelMacs = 1 << 16;
constexpr int64_t kEnoughPanels = 8;
constexpr int64_t kColumnGroups = 8;
// B read in place (no packed micro-panel) below MR rows (GEMV-like), and up
// to kDirectRows rows when B's rows are at most kDirectLdb floats apart: with
// few rows the pack is not amortized, and at such strides B's panel still
// stays in cache (MLP batch 64, K x N = 784 x 512: 5-8 % faster in place;
// at 3-4 KiB strides B's rows collide in the cache sets: the GPT example's
// M = 128 GEMMs with N = 768 and 1024 measured 10 % slower in place).
constexpr int64_t kDirectRows = 64;
constexpr int64_t kDirectLdb = 512;

int64_t k_block(unsigned lanes) { return std::min<int64_t>(256, kL1Bytes / (kVectors * lanes * 4)); }
int64_t max_block_rows(unsigned lanes) { return std::max<int64_t>(1, kABlockBytes / (k_block(lanes) * 4 * kRows)) * kRows; }

struct Emitter {
  llvm::IRBuilder<> &b;
  const GemmArgs &g;
  llvm::LLVMContext &ctx = b.getContext();

  Value *min(Value *x, Value *y) { return b.CreateSelect(b.CreateICmpSLT(x, y), x, y); }

  /// for (k = from; k < to; k += step) acc = body(k, acc), with `acc` in
  /// registers (phis); returns k and acc after the loop. (No body for
  /// k >= to: callers stepping by more than 1 pass to - (step - 1).)
  using Accs = std::vector<Value *>;
  std::pair<Value *, Accs> k_loop(Value *from, Value *to, int64_t step, const Accs &init,
                                  const std::function<Accs(Value *, const Accs &)> &body) {
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock *pre = b.GetInsertBlock();
    auto *header = llvm::BasicBlock::Create(ctx, "gemm.loop", fn);
    auto *bodyb = llvm::BasicBlock::Create(ctx, "gemm.body", fn);
    auto *exit = llvm::BasicBlock::Create(ctx, "gemm.exit", fn);
    b.CreateBr(header);
    b.SetInsertPoint(header);
    llvm::PHINode *k = b.CreatePHI(b.getInt64Ty(), 2);
    k->addIncoming(from, pre);
    std::vector<llvm::PHINode *> phis;
    Accs cur;
    for (Value *v : init) {
      phis.push_back(b.CreatePHI(v->getType(), 2));
      phis.back()->addIncoming(v, pre);
      cur.push_back(phis.back());
    }
    b.CreateCondBr(b.CreateICmpSLT(k, to), bodyb, exit);
    b.SetInsertPoint(bodyb);
    Accs next = body(k, cur);
    llvm::BasicBlock *latch = b.GetInsertBlock();
    for (size_t i = 0; i < phis.size(); ++i)
      phis[i]->addIncoming(next[i], latch);
    k->addIncoming(b.CreateAdd(k, b.getInt64(step), "", true, true), latch);
    b.CreateBr(header);
    b.SetInsertPoint(exit);
    return {k, cur};
  }

  /// for (i = from; i < to; i += step) body(i)
  void loop(Value *from, Value *to, int64_t step, const std::function<void(Value *)> &body) {
    k_loop(from, to, step, {}, [&](Value *i, const Accs &) {
      body(i);
      return Accs{};
    });
  }

  // B's packed micro-panel (on the stack): kc rows of NR floats.
  Value *bpack = nullptr;
  int64_t kc = 0;
  // Where the microkernel reads B: row k of the panel at bsrc + k * bstride
  // (the packed micro-panel, or B itself for small M).
  Value *bsrc = nullptr, *bstride = nullptr;
  // Masks of the panel's vectors when it is the last, partial one (null
  // for full panels): lane l of vector v is column j0 + v * lanes + l < n.
  Value *mask[kVectors] = {};
  // Vectors per tile row: kVectors, or 1 in a partial panel of at most
  // `lanes` columns (the second vector would be all masked: half the FMAs
  // for nothing, e.g. Winograd F(2,3)'s 16-tile GEMMs at 7x7). Each C
  // element's FMA chain is the same either way: the same bits.
  unsigned nvec = kVectors;

  Value *at(Value *base, Value *row, Value *ld, Value *col) {
    return b.CreateGEP(b.getFloatTy(), base, b.CreateAdd(b.CreateMul(row, ld), col));
  }

  // B's elements as stored in its packed panels (GemmArgs::b_dtype): f32,
  // half, or bf16 as i16 bits.
  llvm::Type *b_element() {
    switch (g.b_dtype) {
    case DType::f16:
      return b.getHalfTy();
    case DType::bf16:
      return b.getInt16Ty();
    default:
      return b.getFloatTy();
    }
  }

  // A vector of `lanes` of B's packed elements at p, widened to f32 (exact).
  Value *load_packed(llvm::FixedVectorType *vec, Value *p) {
    if (g.b_dtype == DType::f32)
      return b.CreateAlignedLoad(vec, p, llvm::Align(4));
    unsigned lanes = static_cast<unsigned>(vec->getNumElements());
    auto *narrow = llvm::FixedVectorType::get(b_element(), lanes);
    Value *x = b.CreateAlignedLoad(narrow, p, llvm::Align(2));
    if (g.b_dtype == DType::f16)
      return b.CreateFPExt(x, vec);
    // bf16: its bits are the f32's upper half.
    auto *wide = llvm::FixedVectorType::get(b.getInt32Ty(), lanes);
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(x, wide), llvm::ConstantInt::get(wide, 16)), vec);
  }

  Value *load(llvm::FixedVectorType *vec, Value *p, unsigned v, llvm::Align align = llvm::Align(4)) {
    if (!mask[v])
      return b.CreateAlignedLoad(vec, p, align);
    return b.CreateMaskedLoad(vec, p, align, mask[v], llvm::Constant::getNullValue(vec));
  }
  void store(Value *x, Value *p, unsigned v) {
    if (!mask[v])
      b.CreateAlignedStore(x, p, llvm::Align(4));
    else
      b.CreateMaskedStore(x, p, llvm::Align(4), mask[v]);
  }

  /// if (cond) body()
  void when(Value *cond, const std::function<void()> &body) { emit_if(b, cond, body); }

  // One task: rows [i_begin, i_end) times column panels [p_begin, p_end)
  // (panel p: columns [p * NR, p * NR + NR); the last one, past the full
  // panels, is partial: [full * NR, n), its vectors masked). K runs in
  // blocks of kc, outside the panel loop, so that the task's kc-deep block
  // of A (rows x kc, sized for L2) is re-read from cache by every panel; per
  // panel, B's kc x NR micro-panel is packed (zeros past n) and stays in L1
  // while the task's rows of A stream past it; partial sums go through C.
  // Rows past the last 6-row tile run as a 4-row tile and one-row tiles.
  // `direct` (M < MR, GEMV-like, bandwidth-bound, or few rows and a short
  // ldb: see kDirectRows): B is read in place.
  // `full` / `partial`: whether to emit the full panels' and the partial
  // panel's code (a GEMM whose N is known may need only one).
  void block(Value *i_begin, Value *i_end, Value *p_begin, Value *p_end, bool direct, bool full, bool partial) {
    unsigned lanes = g.lanes;
    int64_t nr = kVectors * lanes;
    auto *vec = llvm::FixedVectorType::get(b.getFloatTy(), lanes);
    llvm::Function *fma = llvm::Intrinsic::getDeclaration(b.GetInsertBlock()->getModule(), llvm::Intrinsic::fma, {vec});
    Value *rows = b.CreateSub(i_end, i_begin);
    Value *i_main = b.CreateAdd(i_begin, b.CreateMul(b.CreateSDiv(rows, b.getInt64(kRows)), b.getInt64(kRows)));
    Value *full_panels = b.CreateSDiv(g.n, b.getInt64(nr));
    // At least one K block, so that K = 0 still writes C (zeros) and runs
    // the epilogue.
    Value *k_blocks = b.CreateSelect(b.CreateICmpSGT(g.k, b.getInt64(0)), g.k, b.getInt64(1));
    loop(b.getInt64(0), k_blocks, kc, [&](Value *k0) {
      Value *k_end = min(b.CreateAdd(k0, b.getInt64(kc)), g.k);
      Value *first = b.CreateICmpEQ(k0, b.getInt64(0));
      Value *last = b.CreateICmpEQ(k_end, g.k);
      auto panel = [&](Value *j0, Value *j_end) {
        if (g.packed_b) { // panel j0 / NR at j0 * K, zeros past N
          bsrc = b.CreateGEP(b_element(), g.b, b.CreateMul(j0, g.k));
          bstride = b.getInt64(nr);
        } else if (direct) {
          bsrc = b.CreateGEP(b.getFloatTy(), g.b, j0);
          bstride = g.ldb;
        } else {
          loop(k0, k_end, 1, [&](Value *k) {
            for (unsigned v = 0; v < nvec; ++v) {
              Value *x = load(vec, at(g.b, k, g.ldb, b.CreateAdd(j0, b.getInt64(v * lanes))), v);
              b.CreateAlignedStore(x, at(bpack, b.CreateSub(k, k0), b.getInt64(nr), b.getInt64(v * lanes)),
                                   llvm::Align(64));
            }
          });
          bsrc = b.CreateGEP(b.getFloatTy(), bpack, b.CreateMul(b.CreateNeg(k0), b.getInt64(nr)));
          bstride = b.getInt64(nr);
        }
        // A is read in place: six rows lda apart, one broadcast each per k
        // (packing A per task measured 3x slower: at NR = 32 the copy costs
        // as much as the tile's FMAs).
        if (nvec == 1) {
          // One vector per row: 12-row tiles (12 FMA chains, as the full
          // tile's), then one 6-row tile if left.
          Value *i_12 = b.CreateAdd(i_begin, b.CreateMul(b.CreateSDiv(b.CreateSub(i_main, i_begin), b.getInt64(2 * kRows)),
                                                         b.getInt64(2 * kRows)));
          loop(i_begin, i_12, 2 * kRows, [&](Value *i0) { tile(i0, 2 * kRows, j0, k0, k_end, first, vec, fma); });
          when(b.CreateICmpSLT(i_12, i_main), [&] { tile(i_12, kRows, j0, k0, k_end, first, vec, fma); });
        } else {
          loop(i_begin, i_main, kRows, [&](Value *i0) { tile(i0, kRows, j0, k0, k_end, first, vec, fma); });
        }
        // Of the 0-5 rows left, four run as one 4-row tile (8 independent
        // FMA chains keep both FMA pipes busy, as the 6-row tile's 12 do;
        // one-row tiles load more per FMA), the rest one at a time.
        Value *four = b.CreateICmpSGE(b.CreateSub(i_end, i_main), b.getInt64(4));
        when(four, [&] { tile(i_main, 4, j0, k0, k_end, first, vec, fma); });
        Value *i_ones = b.CreateSelect(four, b.CreateAdd(i_main, b.getInt64(4)), i_main);
        loop(i_ones, i_end, 1, [&](Value *i) { tile(i, 1, j0, k0, k_end, first, vec, fma); });
        // After the last K block, the epilogue (if any) over the panel's
        // rows and columns [j0, j_end), while they are still in L1/L2: one
        // copy of its code per panel kind rather than per tile kind.
        if (g.epilogue)
          when(last, [&] { epilogue(i_begin, i_end, j0, j_end); });
      };
      if (full)
        loop(p_begin, min(p_end, full_panels), 1, [&](Value *p) {
          Value *j0 = b.CreateMul(p, b.getInt64(nr));
          panel(j0, b.CreateAdd(j0, b.getInt64(nr)));
        });
      if (partial)
        when(b.CreateICmpSGT(p_end, full_panels), [&] {
          Value *j0 = b.CreateMul(full_panels, b.getInt64(nr));
          for (unsigned v = 0; v < kVectors; ++v) { // lane l of vector v: j0 + v * lanes + l < n
            Value *left = b.CreateSub(g.n, b.CreateAdd(j0, b.getInt64(v * lanes)));
            std::vector<llvm::Constant *> iota;
            for (unsigned l = 0; l < lanes; ++l)
              iota.push_back(b.getInt64(l));
            mask[v] = b.CreateICmpSLT(llvm::ConstantVector::get(iota), b.CreateVectorSplat(lanes, left));
          }
          Value *narrow = b.CreateICmpSLE(b.CreateSub(g.n, j0), b.getInt64(lanes));
          when(narrow, [&] {
            nvec = 1;
            panel(j0, g.n);
            nvec = kVectors;
          });
          when(b.CreateNot(narrow), [&] { panel(j0, g.n); });
          for (Value *&m : mask)
            m = nullptr;
        });
    });
  }

  // The epilogue over C[i_from:i_to, j_from:j_to], in place: a row loop
  // around a contiguous column loop (for the loop vectorizer).
  void epilogue(Value *i_from, Value *i_to, Value *j_from, Value *j_to) {
    loop(i_from, i_to, 1, [&](Value *i) {
      loop(j_from, j_to, 1, [&](Value *j) {
        Value *p = at(g.c, i, g.ldc, j);
        Value *acc = b.CreateAlignedLoad(b.getFloatTy(), p, llvm::Align(4));
        b.CreateAlignedStore(g.epilogue->apply(b, acc, i, j), p, llvm::Align(4));
      });
    });
  }

  // A rows x NR tile of C at (i0, j0) over k in [k0, k_end), accumulators in
  // registers, starting from 0 on the first K block, else from C.
  void tile(Value *i0, unsigned rows, Value *j0, Value *k0, Value *k_end, Value *first, llvm::FixedVectorType *vec,
            llvm::Function *fma) {
    unsigned lanes = g.lanes;
    auto c_at = [&](unsigned r, unsigned v) {
      return at(g.c, b.CreateAdd(i0, b.getInt64(r)), g.ldc, b.CreateAdd(j0, b.getInt64(v * lanes)));
    };
    // Accumulators: rows x nvec, row-major.
    Accs acc;
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < nvec; ++v)
        acc.push_back(b.CreateSelect(first, llvm::Constant::getNullValue(vec), load(vec, c_at(r, v), v)));
    // One k step of an accumulator set.
    auto step = [&](Value *k, const Accs &acc) {
      Value *bv[kVectors];
      for (unsigned v = 0; v < nvec; ++v) {
        if (g.packed_b) {
          Value *p = b.CreateGEP(b_element(), bsrc, b.CreateAdd(b.CreateMul(k, bstride), b.getInt64(v * lanes)));
          bv[v] = load_packed(vec, p);
        } else {
          bv[v] = load(vec, at(bsrc, k, bstride, b.getInt64(v * lanes)), v);
        }
      }
      Accs next;
      for (unsigned r = 0; r < rows; ++r) {
        Value *a = b.CreateLoad(b.getFloatTy(), at(g.a, b.CreateAdd(i0, b.getInt64(r)), g.lda, k));
        Value *splat = b.CreateVectorSplat(lanes, a);
        for (unsigned v = 0; v < nvec; ++v)
          next.push_back(b.CreateCall(fma, {splat, bv[v], acc[r * nvec + v]}));
      }
      return next;
    };
    Value *k = k0;
    if (rows == 1) {
      // One row (GEMV-like): one FMA chain per vector would wait on the FMA
      // latency every k, so kUnroll interleaved accumulator sets over
      // consecutive k, summed after the block.
      constexpr unsigned kUnroll = 4; // (the sum below adds four sets)
      size_t n = acc.size();
      Accs sets = acc;
      sets.resize(kUnroll * n, llvm::Constant::getNullValue(vec));
      std::tie(k, sets) = k_loop(k0, b.CreateSub(k_end, b.getInt64(kUnroll - 1)), kUnroll, sets,
                                 [&](Value *k, const Accs &cur) {
                                   Accs next;
                                   for (unsigned u = 0; u < kUnroll; ++u) {
                                     Accs part(cur.begin() + u * n, cur.begin() + (u + 1) * n);
                                     part = step(b.CreateAdd(k, b.getInt64(u)), part);
                                     next.insert(next.end(), part.begin(), part.end());
                                   }
                                   return next;
                                 });
      for (size_t i = 0; i < n; ++i)
        acc[i] = b.CreateFAdd(b.CreateFAdd(sets[i], sets[n + i]), b.CreateFAdd(sets[2 * n + i], sets[3 * n + i]));
    }
    acc = k_loop(k, k_end, 1, acc, step).second;
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < nvec; ++v)
        store(acc[r * nvec + v], c_at(r, v), v);
  }
};

} // namespace

// Whether the tiles read B in place (see kDirectRows).
static Value *direct_b(llvm::IRBuilder<> &b, Value *m, Value *ldb) {
  return b.CreateOr(b.CreateICmpSLT(m, b.getInt64(kRows)),
                    b.CreateAnd(b.CreateICmpSLE(m, b.getInt64(kDirectRows)), b.CreateICmpSLE(ldb, b.getInt64(kDirectLdb))));
}

// Column panels of nr floats (the last one may be partial).
static Value *panel_count(llvm::IRBuilder<> &b, Value *n, int64_t nr) {
  return b.CreateSDiv(b.CreateAdd(n, b.getInt64(nr - 1)), b.getInt64(nr));
}

// The struct a panel task reads its arguments from: a, b, c, m, n, k, lda,
// ldb, ldc, rows per task (a multiple of MR, or M), column panels per task,
// then the epilogue's captures.
static llvm::StructType *task_args_type(llvm::LLVMContext &c, const GemmEpilogue *epilogue) {
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  std::vector<llvm::Type *> fields = {ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64};
  if (epilogue)
    for (Value *v : epilogue->captures)
      fields.push_back(v->getType());
  return llvm::StructType::get(c, fields);
}

// void <prefix>.gemm_panel(ptr args, i64 t): one row block of one group of
// column panels (the last panel masked where it passes N), the unit of work
// handed to the runtime's parallel_for. Shared by
// every GEMM without an epilogue; one of its own for each with one.
static llvm::Function *panel_task(llvm::Module &m, const std::string &prefix, unsigned lanes,
                                  const GemmEpilogue *epilogue, bool packed_b, DType b_dtype,
                                  const bool (&needed)[2][2]) {
  std::string name = prefix + ".gemm_panel." + std::to_string(lanes) + (packed_b ? ".packed" : "") +
                     (b_dtype != DType::f32 ? "." + std::string(dtype_name(b_dtype)) : "") +
                     (epilogue ? ".epilogue" : "");
  if (llvm::Function *f = m.getFunction(name); f && !epilogue)
    return f;
  llvm::LLVMContext &c = m.getContext();
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {llvm::PointerType::getUnqual(c), llvm::Type::getInt64Ty(c)}, false);
  auto *fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  auto *entry_block = llvm::BasicBlock::Create(c, "entry", fn);
  llvm::IRBuilder<> b(entry_block);
  llvm::StructType *st = task_args_type(c, epilogue);
  Value *args = fn->getArg(0);
  auto field = [&](unsigned i, llvm::Type *t) { return b.CreateLoad(t, b.CreateStructGEP(st, args, i)); };
  GemmArgs g{field(0, b.getPtrTy()), field(1, b.getPtrTy()), field(2, b.getPtrTy()), field(3, b.getInt64Ty()),
             field(4, b.getInt64Ty()), field(5, b.getInt64Ty()), field(6, b.getInt64Ty()), field(7, b.getInt64Ty()),
             field(8, b.getInt64Ty()), lanes, prefix, epilogue};
  g.packed_b = packed_b;
  g.b_dtype = b_dtype;
  if (epilogue) {
    // The epilogue's own entry code (its loads of buffers, dims...) goes
    // before the branch to the body.
    std::vector<Value *> captured;
    for (unsigned i = 0; i < epilogue->captures.size(); ++i)
      captured.push_back(field(11 + i, epilogue->captures[i]->getType()));
    auto *body = llvm::BasicBlock::Create(c, "body", fn);
    llvm::BranchInst *br = b.CreateBr(body);
    llvm::IRBuilder<> entry(br);
    epilogue->enter(entry, captured);
    b.SetInsertPoint(body);
  }
  Emitter e{b, g};
  e.kc = k_block(lanes);
  auto *bpack = b.CreateAlloca(llvm::ArrayType::get(b.getFloatTy(), e.kc * kVectors * lanes));
  bpack->setAlignment(llvm::Align(64));
  e.bpack = bpack;
  // Task t: row block t / groups, panel group t % groups.
  int64_t nr = kVectors * lanes;
  Value *rows = field(9, b.getInt64Ty()), *group = field(10, b.getInt64Ty());
  Value *panels = panel_count(b, g.n, nr);
  Value *groups = b.CreateSDiv(b.CreateAdd(panels, b.CreateSub(group, b.getInt64(1))), group);
  Value *t = fn->getArg(1);
  Value *i_begin = b.CreateMul(b.CreateSDiv(t, groups), rows);
  Value *i_end = e.min(b.CreateAdd(i_begin, rows), g.m);
  Value *p_begin = b.CreateMul(b.CreateSRem(t, groups), group);
  Value *p_end = e.min(b.CreateAdd(p_begin, group), panels);
  // Two variants: packed or direct (M below one tile of rows), each with the
  // full and the partial (masked, last) panel's code; those that cannot
  // occur are not emitted.
  auto *ret = llvm::BasicBlock::Create(c, "ret", fn);
  auto *packed = llvm::BasicBlock::Create(c, "gemm.packed", fn);
  auto *direct = llvm::BasicBlock::Create(c, "gemm.direct", fn);
  if (packed_b) // B packed at compile time: one variant
    b.CreateBr(packed);
  else
    b.CreateCondBr(direct_b(b, g.m, g.ldb), direct, packed);
  for (int d = 0; d < 2; ++d) {
    b.SetInsertPoint(d ? direct : packed);
    if (needed[0][d] || needed[1][d])
      e.block(i_begin, i_end, p_begin, p_end, d != 0, needed[0][d], needed[1][d]);
    b.CreateBr(ret);
  }
  b.SetInsertPoint(ret);
  b.CreateRetVoid();
  if (epilogue)
    epilogue->leave();
  return fn;
}

void emit_gemm_f32(llvm::IRBuilder<> &builder, const GemmArgs &args) {
  Emitter e{builder, args};
  llvm::IRBuilder<> &b = builder;
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::Module &m = *fn->getParent();
  llvm::LLVMContext &c = m.getContext();
  // The split (see kRowBlock): rows per task, a multiple of MR (or M when
  // M < MR: GEMV-like, B read in place, once), the row blocks even; panels
  // per task; tasks: row blocks times panel groups.
  int64_t nr = kVectors * args.lanes;
  auto i64 = [&](int64_t v) { return b.getInt64(v); };
  auto ceil_div = [&](Value *x, Value *y) { return b.CreateSDiv(b.CreateAdd(x, b.CreateSub(y, i64(1))), y); };
  Value *panels = panel_count(b, args.n, nr);
  Value *macs = b.CreateMul(b.CreateMul(args.m, args.n), args.k);
  Value *small = args.serial ? b.getTrue() : b.CreateICmpSLT(macs, i64(kParallelMacs));
  Value *m1 = b.CreateSelect(b.CreateICmpSGT(args.m, i64(0)), args.m, i64(1));
  Value *a_fits = b.CreateICmpSLE(b.CreateMul(args.m, args.k), i64(kABlockBytes / 4));
  Value *cap = b.CreateSelect(b.CreateICmpSGE(panels, i64(kEnoughPanels)),
                              b.CreateSelect(a_fits, m1, i64(max_block_rows(args.lanes))), i64(kRowBlock));
  if (args.whole_rows)
    cap = i64(max_block_rows(args.lanes));
  Value *even = b.CreateMul(ceil_div(ceil_div(m1, ceil_div(m1, cap)), i64(kRows)), i64(kRows));
  Value *rows = b.CreateSelect(b.CreateICmpSLT(args.m, i64(kRows)), m1, even);
  Value *row_blocks = ceil_div(m1, rows);
  Value *group = b.CreateSelect(b.CreateOr(b.CreateOr(a_fits, b.CreateICmpSLT(args.m, i64(kRows))),
                                           b.CreateICmpSLE(panels, i64(kColumnGroups))),
                                i64(1), ceil_div(panels, i64(kColumnGroups)));
  if (args.whole_rows)
    group = b.CreateSelect(b.CreateICmpSGT(panels, i64(0)), panels, i64(1));
  Value *tasks = b.CreateMul(row_blocks, ceil_div(panels, group));

  // Arguments for the panel tasks, in an entry-block alloca.
  llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::StructType *st = task_args_type(c, args.epilogue);
  Value *task_args = entry.CreateAlloca(st);
  std::vector<Value *> fields = {args.a, args.b, args.c, args.m, args.n, args.k, args.lda, args.ldb, args.ldc, rows, group};
  if (args.epilogue)
    fields.insert(fields.end(), args.epilogue->captures.begin(), args.epilogue->captures.end());
  for (unsigned i = 0; i < fields.size(); ++i)
    b.CreateStore(fields[i], b.CreateStructGEP(st, task_args, i));
  // The panel variants this GEMM can need: all, unless M or N is a
  // constant (a GEMM with an epilogue has a task function of its own; the
  // one without is shared, so it keeps all four).
  bool needed[2][2] = {{true, true}, {true, true}};
  if (args.epilogue) {
    if (auto *n = llvm::dyn_cast<llvm::ConstantInt>(args.n)) {
      needed[0][0] = needed[0][1] = n->getSExtValue() >= nr;
      needed[1][0] = needed[1][1] = n->getSExtValue() % nr != 0;
    }
    // Direct (B in place) or packed, when M (and, in between, ldb) is known.
    auto *mc = llvm::dyn_cast<llvm::ConstantInt>(args.m);
    auto *lc = llvm::dyn_cast<llvm::ConstantInt>(args.ldb);
    if (!args.packed_b && mc && (mc->getSExtValue() < kRows || mc->getSExtValue() > kDirectRows || lc)) {
      bool direct = mc->getSExtValue() < kRows || (mc->getSExtValue() <= kDirectRows && lc->getSExtValue() <= kDirectLdb);
      for (int p = 0; p < 2; ++p)
        needed[p][direct ? 0 : 1] = false;
    }
  }
  if (args.packed_b) // (the direct variant: none)
    needed[0][1] = needed[1][1] = false;
  if (args.b_dtype != DType::f32 && !args.packed_b)
    throw Error(ErrorCode::Internal, "emit_gemm_f32: a 16-bit B is read only from packed panels");
  llvm::Function *task = panel_task(m, args.prefix, args.lanes, args.epilogue, args.packed_b, args.b_dtype, needed);

  // A small GEMM: its tasks one after another, here. Else the tasks through
  // the runtime's parallel_for (the program's, the artifact's pool, or a loop).
  auto *single = llvm::BasicBlock::Create(c, "gemm.single", fn);
  auto *split = llvm::BasicBlock::Create(c, "gemm.split", fn);
  auto *join = llvm::BasicBlock::Create(c, "gemm.join", fn);
  b.CreateCondBr(small, single, split);
  b.SetInsertPoint(single);
  e.loop(b.getInt64(0), tasks, 1, [&](Value *t) { b.CreateCall(task, {task_args, t}); });
  b.CreateBr(join);
  b.SetInsertPoint(split);
  emit_parallel_for(b, args.prefix, task_args, tasks, task, macs);
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

} // namespace maxc::codegen
