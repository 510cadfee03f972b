#include "GemmEmitter.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <functional>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr unsigned kRows = 6;    // MR
constexpr unsigned kVectors = 2; // NR = kVectors * lanes
constexpr int64_t kKc = 256;     // K block: a 256 x NR panel of B is 32 KiB

struct Emitter {
  llvm::IRBuilder<> &b;
  const GemmArgs &g;
  llvm::LLVMContext &ctx = b.getContext();

  /// for (i = from; i < to; i += step) body(i)
  void loop(Value *from, Value *to, int64_t step, const std::function<void(Value *)> &body) {
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock *pre = b.GetInsertBlock();
    auto *header = llvm::BasicBlock::Create(ctx, "gemm.loop", fn);
    auto *bodyb = llvm::BasicBlock::Create(ctx, "gemm.body", fn);
    auto *exit = llvm::BasicBlock::Create(ctx, "gemm.exit", fn);
    b.CreateBr(header);
    b.SetInsertPoint(header);
    llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2);
    i->addIncoming(from, pre);
    b.CreateCondBr(b.CreateICmpSLT(i, to), bodyb, exit);
    b.SetInsertPoint(bodyb);
    body(i);
    i->addIncoming(b.CreateAdd(i, b.getInt64(step), "", true, true), b.GetInsertBlock());
    b.CreateBr(header);
    b.SetInsertPoint(exit);
  }

  // The packed panel of B: kKc rows of NR floats, on the stack (32 KiB).
  Value *packed = nullptr;
  Value *packed_at(Value *row, unsigned vector) {
    return b.CreateGEP(b.getFloatTy(), packed,
                       b.CreateAdd(b.CreateMul(row, b.getInt64(kVectors * g.lanes)), b.getInt64(vector * g.lanes)));
  }

  Value *at(Value *base, Value *row, Value *ld, Value *col) {
    return b.CreateGEP(b.getFloatTy(), base, b.CreateAdd(b.CreateMul(row, ld), col));
  }

  // One column panel of the main tiles: rows [0, m_main) in steps of 6,
  // columns [j0, j0 + NR). K is split in blocks of kKc so that B's kKc x NR panel
  // stays in L1 while every row block of A streams past it; partial sums
  // go through C.
  void panel(Value *j0, Value *m_main) {
    unsigned lanes = g.lanes;
    auto *vec = llvm::FixedVectorType::get(b.getFloatTy(), lanes);
    llvm::Function *fma = llvm::Intrinsic::getDeclaration(b.GetInsertBlock()->getModule(), llvm::Intrinsic::fma, {vec});
    {
      // At least one K block, so that K = 0 still writes C (zeros) and runs
      // the epilogue.
      Value *k_blocks = b.CreateSelect(b.CreateICmpSGT(g.k, b.getInt64(0)), g.k, b.getInt64(1));
      loop(b.getInt64(0), k_blocks, kKc, [&](Value *k0) {
        Value *k_end = b.CreateSelect(b.CreateICmpSLT(b.CreateAdd(k0, b.getInt64(kKc)), g.k),
                                      b.CreateAdd(k0, b.getInt64(kKc)), g.k);
        Value *first = b.CreateICmpEQ(k0, b.getInt64(0));
        Value *last = b.CreateICmpEQ(k_end, g.k);
        // Pack B[k0:k_end, j0:j0+NR] contiguously: the microkernel then reads
        // 2 cache lines per k instead of touching a new page per k.
        loop(k0, k_end, 1, [&](Value *kk) {
          for (unsigned v = 0; v < kVectors; ++v) {
            Value *x = b.CreateAlignedLoad(vec, at(g.b, kk, g.ldb, b.CreateAdd(j0, b.getInt64(v * lanes))), llvm::Align(4));
            b.CreateAlignedStore(x, packed_at(b.CreateSub(kk, k0), v), llvm::Align(64));
          }
        });
        loop(b.getInt64(0), m_main, kRows, [&](Value *i0) { tile(i0, kRows, j0, k0, k_end, first, last, vec, fma); });
        // Leftover rows (M % 6) one at a time, still vectorized across the panel.
        loop(m_main, g.m, 1, [&](Value *i) { tile(i, 1, j0, k0, k_end, first, last, vec, fma); });
      });
    }
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
  // registers, starting from 0 on the first K block, else from C; after the
  // last K block, the epilogue (if any) runs over the tile.
  void tile(Value *i0, unsigned rows, Value *j0, Value *k0, Value *k_end, Value *first, Value *last,
            llvm::FixedVectorType *vec, llvm::Function *fma) {
    unsigned lanes = g.lanes;
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    Value *start[kRows][kVectors];
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < kVectors; ++v) {
        Value *c = b.CreateAlignedLoad(
            vec, at(g.c, b.CreateAdd(i0, b.getInt64(r)), g.ldc, b.CreateAdd(j0, b.getInt64(v * lanes))), llvm::Align(4));
        start[r][v] = b.CreateSelect(first, llvm::Constant::getNullValue(vec), c);
      }
    llvm::BasicBlock *pre = b.GetInsertBlock();
    auto *header = llvm::BasicBlock::Create(ctx, "gemm.k", fn);
    auto *body = llvm::BasicBlock::Create(ctx, "gemm.kbody", fn);
    auto *exit = llvm::BasicBlock::Create(ctx, "gemm.kexit", fn);
    b.CreateBr(header);
    b.SetInsertPoint(header);
    llvm::PHINode *k = b.CreatePHI(b.getInt64Ty(), 2);
    k->addIncoming(k0, pre);
    llvm::PHINode *acc[kRows][kVectors];
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < kVectors; ++v) {
        acc[r][v] = b.CreatePHI(vec, 2);
        acc[r][v]->addIncoming(start[r][v], pre);
      }
    b.CreateCondBr(b.CreateICmpSLT(k, k_end), body, exit);
    b.SetInsertPoint(body);
    Value *bv[kVectors];
    for (unsigned v = 0; v < kVectors; ++v)
      bv[v] = b.CreateAlignedLoad(vec, packed_at(b.CreateSub(k, k0), v), llvm::Align(64));
    Value *next[kRows][kVectors];
    for (unsigned r = 0; r < rows; ++r) {
      Value *a = b.CreateLoad(b.getFloatTy(), at(g.a, b.CreateAdd(i0, b.getInt64(r)), g.lda, k));
      Value *splat = b.CreateVectorSplat(lanes, a);
      for (unsigned v = 0; v < kVectors; ++v)
        next[r][v] = b.CreateCall(fma, {splat, bv[v], acc[r][v]});
    }
    llvm::BasicBlock *latch = b.GetInsertBlock();
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < kVectors; ++v)
        acc[r][v]->addIncoming(next[r][v], latch);
    k->addIncoming(b.CreateAdd(k, b.getInt64(1), "", true, true), latch);
    b.CreateBr(header);
    b.SetInsertPoint(exit);
    for (unsigned r = 0; r < rows; ++r)
      for (unsigned v = 0; v < kVectors; ++v)
        b.CreateAlignedStore(acc[r][v], at(g.c, b.CreateAdd(i0, b.getInt64(r)), g.ldc, b.CreateAdd(j0, b.getInt64(v * lanes))),
                             llvm::Align(4));
    if (g.epilogue) {
      auto *epi = llvm::BasicBlock::Create(ctx, "gemm.epilogue", fn);
      auto *done = llvm::BasicBlock::Create(ctx, "gemm.epilogue.done", fn);
      b.CreateCondBr(last, epi, done);
      b.SetInsertPoint(epi);
      epilogue(i0, b.CreateAdd(i0, b.getInt64(rows)), j0, b.CreateAdd(j0, b.getInt64(kVectors * lanes)));
      b.CreateBr(done);
      b.SetInsertPoint(done);
    }
  }

  // C[i, j] for a rectangle, one dot product per element.
  void scalar(Value *i_from, Value *i_to, Value *j_from, Value *j_to) {
    loop(i_from, i_to, 1, [&](Value *i) {
      loop(j_from, j_to, 1, [&](Value *j) {
        llvm::Function *fn = b.GetInsertBlock()->getParent();
        llvm::BasicBlock *pre = b.GetInsertBlock();
        auto *header = llvm::BasicBlock::Create(ctx, "gemm.sk", fn);
        auto *body = llvm::BasicBlock::Create(ctx, "gemm.skbody", fn);
        auto *exit = llvm::BasicBlock::Create(ctx, "gemm.skexit", fn);
        b.CreateBr(header);
        b.SetInsertPoint(header);
        llvm::PHINode *k = b.CreatePHI(b.getInt64Ty(), 2);
        llvm::PHINode *acc = b.CreatePHI(b.getFloatTy(), 2);
        k->addIncoming(b.getInt64(0), pre);
        acc->addIncoming(llvm::ConstantFP::get(b.getFloatTy(), 0.0), pre);
        b.CreateCondBr(b.CreateICmpSLT(k, g.k), body, exit);
        b.SetInsertPoint(body);
        Value *x = b.CreateLoad(b.getFloatTy(), at(g.a, i, g.lda, k));
        Value *y = b.CreateLoad(b.getFloatTy(), at(g.b, k, g.ldb, j));
        Value *sum = b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {x, y, acc});
        acc->addIncoming(sum, b.GetInsertBlock());
        k->addIncoming(b.CreateAdd(k, b.getInt64(1), "", true, true), b.GetInsertBlock());
        b.CreateBr(header);
        b.SetInsertPoint(exit);
        b.CreateStore(g.epilogue ? g.epilogue->apply(b, acc, i, j) : static_cast<Value *>(acc), at(g.c, i, g.ldc, j));
      });
    });
  }
};

} // namespace

// The struct a panel task reads its arguments from: a, b, c, m, n, k, lda,
// ldb, ldc, then the epilogue's captures.
static llvm::StructType *task_args_type(llvm::LLVMContext &c, const GemmEpilogue *epilogue) {
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  std::vector<llvm::Type *> fields = {ptr, ptr, ptr, i64, i64, i64, i64, i64, i64};
  if (epilogue)
    for (Value *v : epilogue->captures)
      fields.push_back(v->getType());
  return llvm::StructType::get(c, fields);
}

// void <prefix>.gemm_panel(ptr args, i64 panel): one column panel, the unit
// of work handed to the caller's parallel_for (or run in a loop). Shared by
// every GEMM without an epilogue; one of its own for each with one.
static llvm::Function *panel_task(llvm::Module &m, const std::string &prefix, unsigned lanes,
                                  const GemmEpilogue *epilogue) {
  std::string name = prefix + ".gemm_panel." + std::to_string(lanes) + (epilogue ? ".epilogue" : "");
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
  if (epilogue) {
    // The epilogue's own entry code (its loads of buffers, dims...) goes
    // before the branch to the body.
    std::vector<Value *> captured;
    for (unsigned i = 0; i < epilogue->captures.size(); ++i)
      captured.push_back(field(9 + i, epilogue->captures[i]->getType()));
    auto *body = llvm::BasicBlock::Create(c, "body", fn);
    llvm::BranchInst *br = b.CreateBr(body);
    llvm::IRBuilder<> entry(br);
    epilogue->enter(entry, captured);
    b.SetInsertPoint(body);
  }
  Emitter e{b, g};
  auto *packed = b.CreateAlloca(llvm::ArrayType::get(b.getFloatTy(), kKc * kVectors * lanes));
  packed->setAlignment(llvm::Align(64));
  e.packed = packed;
  Value *m_main = b.CreateMul(b.CreateSDiv(g.m, b.getInt64(kRows)), b.getInt64(kRows));
  e.panel(b.CreateMul(fn->getArg(1), b.getInt64(kVectors * lanes)), m_main);
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
  int64_t nr = kVectors * args.lanes;
  Value *n_main = b.CreateMul(b.CreateSDiv(args.n, b.getInt64(nr)), b.getInt64(nr));
  Value *panels = b.CreateSDiv(args.n, b.getInt64(nr));

  // Arguments for the panel tasks, in an entry-block alloca.
  llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::StructType *st = task_args_type(c, args.epilogue);
  Value *task_args = entry.CreateAlloca(st);
  std::vector<Value *> fields = {args.a, args.b, args.c, args.m, args.n, args.k, args.lda, args.ldb, args.ldc};
  if (args.epilogue)
    fields.insert(fields.end(), args.epilogue->captures.begin(), args.epilogue->captures.end());
  for (unsigned i = 0; i < fields.size(); ++i)
    b.CreateStore(fields[i], b.CreateStructGEP(st, task_args, i));
  llvm::Function *task = panel_task(m, args.prefix, args.lanes, args.epilogue);

  // The caller's parallel_for, if it set one (NAME_set_parallel_for), runs
  // the panels; else they run here, one after another.
  auto *pf_global = llvm::cast<llvm::GlobalVariable>(m.getOrInsertGlobal(args.prefix + ".parallel_for", b.getPtrTy()));
  if (!pf_global->hasInitializer()) {
    pf_global->setLinkage(llvm::GlobalValue::InternalLinkage);
    pf_global->setInitializer(llvm::ConstantPointerNull::get(b.getPtrTy()));
  }
  Value *pf = b.CreateLoad(b.getPtrTy(), pf_global);
  auto *serial = llvm::BasicBlock::Create(c, "gemm.serial", fn);
  auto *parallel = llvm::BasicBlock::Create(c, "gemm.parallel", fn);
  auto *join = llvm::BasicBlock::Create(c, "gemm.join", fn);
  b.CreateCondBr(b.CreateICmpEQ(pf, llvm::ConstantPointerNull::get(b.getPtrTy())), serial, parallel);
  b.SetInsertPoint(serial);
  e.loop(b.getInt64(0), panels, 1, [&](Value *p) { b.CreateCall(task, {task_args, p}); });
  b.CreateBr(join);
  b.SetInsertPoint(parallel);
  auto *pf_type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty(), b.getPtrTy()}, false);
  b.CreateCall(pf_type, pf, {task_args, panels, task});
  b.CreateBr(join);
  b.SetInsertPoint(join);
  e.scalar(b.getInt64(0), args.m, n_main, args.n); // right edge (rows left over are done in the panels)
}

} // namespace maxc::codegen
