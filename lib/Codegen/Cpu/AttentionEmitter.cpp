#include "Cpu/AttentionEmitter.h"

#include "MathEmitter.h"

#include <llvm/IR/Module.h>

#include <cmath>

namespace maxc::codegen {

using llvm::Value;

namespace {
Value *f32(llvm::IRBuilder<> &b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }
} // namespace

// Keys are taken kBlock at a time: their scores go to a small local array
// (each a vectorized dot product), then the block's max, one rescale of the
// running sum and accumulator, and the block's exps as one vectorizable loop.
constexpr int64_t kBlock = 16;
// The query-block kernel's P.V update: query rows per pass (a power of 2).
constexpr int64_t kRowsAtOnce = 4;

void emit_attention_kernel(llvm::IRBuilder<> &b, const AttentionKernel &a) {
  llvm::Type *f = b.getFloatTy();
  auto *acc_t = llvm::ArrayType::get(f, static_cast<uint64_t>(a.dv));
  auto *blk_t = llvm::ArrayType::get(f, kBlock);
  Value *acc = a.local(acc_t), *sc = a.local(blk_t), *m_var = a.local(f), *l_var = a.local(f), *dot_var = a.local(f),
        *bm_var = a.local(f);
  auto acc_at = [&](Value *e) { return b.CreateInBoundsGEP(acc_t, acc, {b.getInt64(0), e}); };
  auto sc_at = [&](Value *j) { return b.CreateInBoundsGEP(blk_t, sc, {b.getInt64(0), j}); };
  Value *d = b.getInt64(a.d), *dv = b.getInt64(a.dv), *block = b.getInt64(kBlock);
  Value *neg_inf = f32(b, -INFINITY);
  llvm::FastMathFlags fast;
  fast.setAllowReassoc();
  fast.setAllowContract();
  Value *blocks = b.CreateUDiv(b.CreateAdd(a.sk, b.getInt64(kBlock - 1)), block);
  a.loop(a.sq, [&](Value *i) {
    a.loop(dv, [&](Value *e) { b.CreateStore(f32(b, 0.0), acc_at(e)); });
    b.CreateStore(neg_inf, m_var);
    b.CreateStore(f32(b, 0.0), l_var);
    a.loop(blocks, [&](Value *blk) {
      Value *j0 = b.CreateMul(blk, block);
      Value *rest = b.CreateSub(a.sk, j0);
      Value *count = b.CreateSelect(b.CreateICmpULT(rest, block), rest, block);
      // Scores: scale * q_i . k_j (reassociated: the dot vectorizes), masked.
      a.loop(count, [&](Value *jj) {
        Value *j = b.CreateAdd(j0, jj);
        b.CreateStore(f32(b, 0.0), dot_var);
        a.loop(d, [&](Value *e) {
          Value *prod = b.CreateFMul(a.q(i, e), a.k(j, e));
          Value *sum = b.CreateFAdd(b.CreateLoad(f, dot_var), prod);
          llvm::cast<llvm::Instruction>(prod)->setFastMathFlags(fast);
          llvm::cast<llvm::Instruction>(sum)->setFastMathFlags(fast);
          b.CreateStore(sum, dot_var);
        });
        Value *s = b.CreateFMul(b.CreateLoad(f, dot_var), f32(b, a.scale));
        if (a.mask) {
          Value *mk = a.mask(i, j);
          s = mk->getType()->isIntegerTy(1) ? b.CreateSelect(mk, s, f32(b, a.fill)) : b.CreateFAdd(s, mk);
        }
        b.CreateStore(s, sc_at(jj));
      });
      // The block's max (a NaN wins), the new running max, the rescale c.
      b.CreateStore(b.CreateLoad(f, m_var), bm_var);
      a.loop(count, [&](Value *jj) {
        Value *s = b.CreateLoad(f, sc_at(jj)), *bm = b.CreateLoad(f, bm_var);
        b.CreateStore(b.CreateSelect(b.CreateOr(b.CreateFCmpOGT(s, bm), b.CreateFCmpUNO(s, s)), s, bm), bm_var);
      });
      Value *m = b.CreateLoad(f, m_var), *new_m = b.CreateLoad(f, bm_var);
      Value *c = b.CreateSelect(b.CreateFCmpOEQ(m, neg_inf), f32(b, 0.0), emit_exp_f32(b, b.CreateFSub(m, new_m)));
      b.CreateStore(new_m, m_var);
      // p_j = exp(s_j - new_m) (0 for a -inf score), l = l * c + sum p.
      b.CreateStore(b.CreateFMul(b.CreateLoad(f, l_var), c), l_var);
      a.loop(count, [&](Value *jj) {
        Value *s = b.CreateLoad(f, sc_at(jj));
        Value *p = b.CreateSelect(b.CreateFCmpOEQ(s, neg_inf), f32(b, 0.0), emit_exp_f32(b, b.CreateFSub(s, new_m)));
        b.CreateStore(p, sc_at(jj));
        Value *l = b.CreateFAdd(b.CreateLoad(f, l_var), p); // reassociated: the loop vectorizes
        llvm::cast<llvm::Instruction>(l)->setFastMathFlags(fast);
        b.CreateStore(l, l_var);
      });
      // acc = acc * c + sum_j p_j v_j
      a.loop(dv, [&](Value *e) { b.CreateStore(b.CreateFMul(b.CreateLoad(f, acc_at(e)), c), acc_at(e)); });
      a.loop(count, [&](Value *jj) {
        Value *p = b.CreateLoad(f, sc_at(jj)), *j = b.CreateAdd(j0, jj);
        a.loop(dv, [&](Value *e) {
          Value *ptr = acc_at(e);
          b.CreateStore(b.CreateFAdd(b.CreateLoad(f, ptr), b.CreateFMul(p, a.v(j, e))), ptr);
        });
      });
    });
    Value *inv = b.CreateFDiv(f32(b, 1.0), b.CreateLoad(f, l_var));
    a.loop(dv, [&](Value *e) { a.store(i, e, b.CreateFMul(b.CreateLoad(f, acc_at(e)), inv)); });
  });
}

} // namespace maxc::codegen

// ---------------------------------------------------------------------------
// The query-block kernel (AttentionFunction): queries in the vector lanes.

namespace maxc::codegen {

namespace {

class BlockKernel {
public:
  BlockKernel(llvm::Module &m, const std::string &name, const AttentionFunction &a)
      : a_(a), c_(m.getContext()), b_(c_), f_(b_.getFloatTy()), i64_(b_.getInt64Ty()),
        w_(static_cast<int64_t>(a.lanes)), vt_(llvm::FixedVectorType::get(f_, a.lanes)) {
    auto *ptr = b_.getPtrTy();
    auto *type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr, ptr, i64_, i64_, i64_, i64_, i64_, i64_},
                                         false);
    fn_ = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, m);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned i = 0; i < 5; ++i) {
      fn_->addParamAttr(i, llvm::Attribute::NoAlias);
      fn_->addParamAttr(i, llvm::Attribute::NoCapture);
      if (i < 4)
        fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
    }
    entry_ = llvm::BasicBlock::Create(c_, "entry", fn_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(c_, "body", fn_));
  }

  llvm::Function *emit() {
    Value *q = arg(0), *k = arg(1), *v = arg(2), *mask = arg(3), *out = arg(4);
    Value *sq = arg(5), *sk = arg(6), *i_begin = arg(7), *i_end = arg(8), *mrs = arg(9), *mcs = arg(10);
    (void)sq;
    int64_t d = a_.d, dv = a_.dv, w = w_, chunks = (dv + w - 1) / w, dvp = chunks * w;
    int64_t q_stride = a_.q_row_stride ? a_.q_row_stride : d, k_stride = a_.k_row_stride ? a_.k_row_stride : d,
            v_stride = a_.v_row_stride ? a_.v_row_stride : dv;
    Value *qt = local(llvm::ArrayType::get(f_, static_cast<uint64_t>(d * w)));   // q block, [d][w], scaled
    Value *pt = local(llvm::ArrayType::get(f_, static_cast<uint64_t>(w * w)));   // p block, [key][query]
    Value *acc = local(llvm::ArrayType::get(f_, static_cast<uint64_t>(w * dvp))); // [query][dvp]
    Value *cv = local(vt_), *lv = local(vt_), *m_var = local(vt_), *l_var = local(vt_);
    std::vector<Value *> s_var(static_cast<size_t>(w));
    for (Value *&s : s_var)
      s = local(vt_);
    Value *neg_inf = splat(-INFINITY), *zero = splat(0.0);
    Value *one = b_.getInt64(1);
    std::vector<llvm::Constant *> lane_ids;
    for (int64_t l = 0; l < w; ++l)
      lane_ids.push_back(b_.getInt64(l));
    Value *lanes = llvm::ConstantVector::get(lane_ids);

    range(i_begin, i_end, b_.getInt64(w), [&](Value *i0) {
      Value *nq = smin(b_.getInt64(w), b_.CreateSub(i_end, i0));
      Value *last_row = b_.CreateSub(i_end, one);
      // Pack the block's q rows transposed and scaled (rows past the block
      // repeat its last row: their lanes are computed and never stored).
      range(b_.getInt64(0), b_.getInt64(w), one, [&](Value *r) {
        Value *row = smin(b_.CreateAdd(i0, r), last_row);
        Value *src = gep(q, b_.CreateMul(row, b_.getInt64(q_stride)));
        range(b_.getInt64(0), b_.getInt64(d), one, [&](Value *e) {
          Value *x = b_.CreateFMul(b_.CreateLoad(f_, gep(src, e)), llvm::ConstantFP::get(f_, a_.scale));
          b_.CreateStore(x, gep(qt, b_.CreateAdd(b_.CreateMul(e, b_.getInt64(w)), r)));
        });
      });
      b_.CreateMemSet(acc, b_.getInt8(0), static_cast<uint64_t>(w * dvp * 4), llvm::MaybeAlign(64));
      b_.CreateStore(neg_inf, m_var);
      b_.CreateStore(zero, l_var);
      Value *rows_vec = b_.CreateAdd(b_.CreateVectorSplat(a_.lanes, i0), lanes); // the lanes' query indices
      // Causal with a fill of -1e4 or less: the keys past the block's last
      // query would add exp(fill - m) = 0 (f32 and double alike, for any
      // max m above -9900), so they are skipped; a larger fill is applied.
      bool skip = a_.mask == AttentionFunction::Mask::causal && a_.fill <= -1e4;
      Value *keys = skip ? smin(sk, b_.CreateAdd(i0, nq)) : sk;
      range(b_.getInt64(0), keys, b_.getInt64(w), [&](Value *j0) {
        Value *count = smin(b_.getInt64(w), b_.CreateSub(keys, j0));
        Value *last_key = b_.CreateSub(sk, one);
        std::vector<Value *> key(static_cast<size_t>(w)), valid(static_cast<size_t>(w)), krow(static_cast<size_t>(w));
        for (int64_t jj = 0; jj < w; ++jj) {
          key[jj] = b_.CreateAdd(j0, b_.getInt64(jj));
          valid[jj] = b_.CreateICmpSLT(b_.getInt64(jj), count);
          krow[jj] = gep(k, b_.CreateMul(smin(key[jj], last_key), b_.getInt64(k_stride)));
          b_.CreateStore(zero, s_var[jj]);
        }
        // Scores: s[jj][lane] = sum_e qt[e][lane] * k[j0 + jj][e].
        range(b_.getInt64(0), b_.getInt64(d), one, [&](Value *e) {
          Value *qe = b_.CreateAlignedLoad(vt_, gep(qt, b_.CreateMul(e, b_.getInt64(w))), llvm::Align(4));
          for (int64_t jj = 0; jj < w; ++jj) {
            Value *ke = b_.CreateVectorSplat(a_.lanes, b_.CreateLoad(f_, gep(krow[jj], e)));
            b_.CreateStore(fma(qe, ke, b_.CreateLoad(vt_, s_var[jj])), s_var[jj]);
          }
        });
        std::vector<Value *> s(static_cast<size_t>(w));
        Value *m_old = b_.CreateLoad(vt_, m_var), *m_new = m_old;
        for (int64_t jj = 0; jj < w; ++jj) {
          Value *x = b_.CreateLoad(vt_, s_var[jj]);
          x = apply_mask(x, key[jj], smin(key[jj], last_key), rows_vec, nq, mask, mrs, mcs);
          x = b_.CreateSelect(valid[jj], x, neg_inf);
          s[jj] = x;
          // the running max; a NaN score wins (and stays)
          m_new = b_.CreateSelect(b_.CreateOr(b_.CreateFCmpOGT(x, m_new), b_.CreateFCmpUNO(x, x)), x, m_new);
        }
        Value *c = b_.CreateSelect(b_.CreateFCmpOEQ(m_old, neg_inf), zero, emit_exp_f32(b_, b_.CreateFSub(m_old, m_new)));
        Value *l = b_.CreateFMul(b_.CreateLoad(vt_, l_var), c);
        for (int64_t jj = 0; jj < w; ++jj) {
          Value *p = b_.CreateSelect(b_.CreateFCmpOEQ(s[jj], neg_inf), zero, emit_exp_f32(b_, b_.CreateFSub(s[jj], m_new)));
          l = b_.CreateFAdd(l, p);
          b_.CreateAlignedStore(p, gep(pt, b_.getInt64(jj * w)), llvm::Align(4));
        }
        b_.CreateStore(m_new, m_var);
        b_.CreateStore(l, l_var);
        b_.CreateStore(c, cv);
        // acc[r] = acc[r] * c[r] + sum_jj p[jj][r] * v[j0 + jj], v by dv chunks.
        for (int64_t ch = 0; ch < chunks; ++ch) {
          int64_t width = std::min(w, dv - ch * w);
          std::vector<Value *> vv(static_cast<size_t>(w));
          for (int64_t jj = 0; jj < w; ++jj) {
            Value *src = gep(v, b_.CreateAdd(b_.CreateMul(smin(key[jj], last_key), b_.getInt64(v_stride)), b_.getInt64(ch * w)));
            vv[jj] = b_.CreateSelect(valid[jj], load_chunk(src, width), zero);
          }
          // Query rows kRowsAtOnce at a time, their FMA chains interleaved
          // (one row's chain of w dependent FMAs alone waits on the FMA
          // latency); each row's own order of operations is unchanged.
          auto rows = [&](Value *r0, int64_t count) {
            std::vector<Value *> dst(static_cast<size_t>(count)), x(static_cast<size_t>(count));
            for (int64_t u = 0; u < count; ++u) {
              Value *r = b_.CreateAdd(r0, b_.getInt64(u));
              dst[u] = gep(acc, b_.CreateAdd(b_.CreateMul(r, b_.getInt64(dvp)), b_.getInt64(ch * w)));
              x[u] = b_.CreateFMul(b_.CreateAlignedLoad(vt_, dst[u], llvm::Align(4)),
                                   b_.CreateVectorSplat(a_.lanes, b_.CreateLoad(f_, gep(cv, r))));
            }
            for (int64_t jj = 0; jj < w; ++jj)
              for (int64_t u = 0; u < count; ++u) {
                Value *r = b_.CreateAdd(r0, b_.getInt64(u));
                Value *p = b_.CreateLoad(f_, gep(pt, b_.CreateAdd(b_.getInt64(jj * w), r)));
                x[u] = fma(b_.CreateVectorSplat(a_.lanes, p), vv[jj], x[u]);
              }
            for (int64_t u = 0; u < count; ++u)
              b_.CreateAlignedStore(x[u], dst[u], llvm::Align(4));
          };
          Value *nq_main = b_.CreateAnd(nq, b_.getInt64(-kRowsAtOnce));
          range(b_.getInt64(0), nq_main, b_.getInt64(kRowsAtOnce), [&](Value *r) { rows(r, kRowsAtOnce); });
          range(nq_main, nq, one, [&](Value *r) { rows(r, 1); });
        }
      });
      // out = acc / l (0 / 0 = NaN for a row without keys, as the reference).
      b_.CreateStore(b_.CreateLoad(vt_, l_var), lv);
      range(b_.getInt64(0), nq, one, [&](Value *r) {
        Value *inv = b_.CreateVectorSplat(a_.lanes, b_.CreateFDiv(llvm::ConstantFP::get(f_, 1.0), b_.CreateLoad(f_, gep(lv, r))));
        Value *row = gep(out, b_.CreateMul(b_.CreateAdd(i0, r), b_.getInt64(dv)));
        for (int64_t ch = 0; ch < chunks; ++ch) {
          Value *x = b_.CreateAlignedLoad(vt_, gep(acc, b_.CreateAdd(b_.CreateMul(r, b_.getInt64(dvp)), b_.getInt64(ch * w))),
                                          llvm::Align(4));
          store_chunk(b_.CreateFMul(x, inv), gep(row, b_.getInt64(ch * w)), std::min(w, dv - ch * w));
        }
      });
    });
    b_.CreateRetVoid();
    llvm::IRBuilder<>(entry_).CreateBr(&*std::next(fn_->begin()));
    return fn_;
  }

private:
  Value *arg(unsigned i) { return fn_->getArg(i); }
  Value *splat(double x) { return llvm::ConstantFP::get(vt_, x); }
  Value *smin(Value *x, Value *y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); }
  Value *gep(Value *p, Value *i) { return b_.CreateInBoundsGEP(f_, p, i); }
  Value *fma(Value *x, Value *y, Value *z) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {x, y, z});
  }
  Value *local(llvm::Type *t) {
    llvm::IRBuilder<> e(entry_);
    llvm::AllocaInst *a = e.CreateAlloca(t);
    a->setAlignment(llvm::Align(64));
    return a;
  }
  /// for (i = begin; i < end; i += step) body(i)
  void range(Value *begin, Value *end, Value *step, const std::function<void(Value *)> &body) {
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    auto *head = llvm::BasicBlock::Create(c_, "head", fn_), *loop = llvm::BasicBlock::Create(c_, "loop", fn_),
         *exit = llvm::BasicBlock::Create(c_, "exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode *i = b_.CreatePHI(i64_, 2);
    i->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, end), loop, exit);
    b_.SetInsertPoint(loop);
    body(i);
    i->addIncoming(b_.CreateAdd(i, step), b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
  }
  llvm::Constant *lane_mask(int64_t width) {
    std::vector<llvm::Constant *> bits;
    for (int64_t l = 0; l < w_; ++l)
      bits.push_back(b_.getInt1(l < width));
    return llvm::ConstantVector::get(bits);
  }
  /// `width` floats at p as a vector (lanes past width 0).
  Value *load_chunk(Value *p, int64_t width) {
    if (width == w_)
      return b_.CreateAlignedLoad(vt_, p, llvm::Align(4));
    return b_.CreateMaskedLoad(vt_, p, llvm::Align(4), lane_mask(width), splat(0.0));
  }
  void store_chunk(Value *x, Value *p, int64_t width) {
    if (width == w_)
      b_.CreateAlignedStore(x, p, llvm::Align(4));
    else
      b_.CreateMaskedStore(x, p, llvm::Align(4), lane_mask(width));
  }
  /// The mask applied to the scores x of key `key` (`kc`: clamped to a real
  /// key) for the lanes' queries `rows`: by index (causal), or the mask's
  /// elements: one broadcast scalar when every query row has the same mask
  /// (mask_per_row false), else gathered.
  Value *apply_mask(Value *x, Value *key, Value *kc, Value *rows, Value *nq, Value *mask, Value *mrs, Value *mcs) {
    using M = AttentionFunction::Mask;
    if (a_.mask == M::none)
      return x;
    Value *fill = splat(a_.fill);
    if (a_.mask == M::causal)
      return b_.CreateSelect(b_.CreateICmpSLE(b_.CreateVectorSplat(a_.lanes, key), rows), x, fill);
    bool boolean = a_.mask == M::boolean;
    llvm::Type *et = boolean ? b_.getInt8Ty() : f_;
    auto *et_vec = llvm::FixedVectorType::get(et, a_.lanes);
    Value *col = b_.CreateMul(kc, mcs);
    Value *m;
    if (!a_.mask_per_row) {
      m = b_.CreateVectorSplat(a_.lanes, b_.CreateLoad(et, b_.CreateInBoundsGEP(et, mask, col)));
    } else {
      // Lanes past the block's rows read its first row (always there).
      Value *first = b_.CreateExtractElement(rows, uint64_t(0));
      Value *in_block = b_.CreateICmpSLT(rows, b_.CreateVectorSplat(a_.lanes, b_.CreateAdd(first, nq)));
      Value *safe_rows = b_.CreateSelect(in_block, rows, b_.CreateVectorSplat(a_.lanes, first));
      Value *offsets = b_.CreateAdd(b_.CreateMul(safe_rows, b_.CreateVectorSplat(a_.lanes, mrs)),
                                    b_.CreateVectorSplat(a_.lanes, col));
      m = b_.CreateMaskedGather(et_vec, b_.CreateInBoundsGEP(et, mask, offsets), llvm::Align(1));
    }
    if (boolean)
      return b_.CreateSelect(b_.CreateICmpNE(m, llvm::Constant::getNullValue(et_vec)), x, fill);
    return b_.CreateFAdd(x, m);
  }

  const AttentionFunction &a_;
  llvm::LLVMContext &c_;
  llvm::IRBuilder<> b_;
  llvm::Type *f_, *i64_;
  int64_t w_;
  llvm::FixedVectorType *vt_;
  llvm::Function *fn_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr;
};

} // namespace

llvm::Function *emit_attention_function(llvm::Module &m, const std::string &name, const AttentionFunction &a) {
  return BlockKernel(m, name, a).emit();
}

llvm::Function *emit_attention_rows_function(llvm::Module &m, const std::string &name, const AttentionFunction &a) {
  llvm::LLVMContext &c = m.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type *f = b.getFloatTy(), *i64 = b.getInt64Ty(), *ptr = b.getPtrTy();
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, i64}, false);
  auto *fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned i = 0; i < 5; ++i) {
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::NoCapture);
  }
  auto *entry = llvm::BasicBlock::Create(c, "entry", fn);
  auto *body = llvm::BasicBlock::Create(c, "body", fn);
  llvm::IRBuilder<> allocas(entry);
  b.SetInsertPoint(body);
  Value *q = fn->getArg(0), *k = fn->getArg(1), *v = fn->getArg(2), *mask = fn->getArg(3), *out = fn->getArg(4);
  Value *sk = fn->getArg(6), *i0 = fn->getArg(7), *i1 = fn->getArg(8), *mrs = fn->getArg(9), *mcs = fn->getArg(10);
  int64_t q_rs = a.q_row_stride ? a.q_row_stride : a.d, k_rs = a.k_row_stride ? a.k_row_stride : a.d,
          v_rs = a.v_row_stride ? a.v_row_stride : a.dv;
  auto load = [&](Value *base, Value *row, int64_t stride, Value *col) {
    return b.CreateLoad(f, b.CreateInBoundsGEP(f, base, b.CreateAdd(b.CreateMul(row, b.getInt64(stride)), col)));
  };
  AttentionKernel r;
  r.sq = b.CreateSub(i1, i0);
  r.sk = sk;
  r.d = a.d;
  r.dv = a.dv;
  r.scale = a.scale;
  r.fill = a.fill;
  r.q = [&](Value *i, Value *e) { return load(q, b.CreateAdd(i0, i), q_rs, e); };
  r.k = [&](Value *j, Value *e) { return load(k, j, k_rs, e); };
  r.v = [&](Value *j, Value *e) { return load(v, j, v_rs, e); };
  if (a.mask == AttentionFunction::Mask::causal)
    r.mask = [&](Value *i, Value *j) { return b.CreateICmpSLE(j, b.CreateAdd(i0, i)); };
  else if (a.mask != AttentionFunction::Mask::none)
    r.mask = [&](Value *i, Value *j) -> Value * {
      Value *at = b.CreateAdd(b.CreateMul(b.CreateAdd(i0, i), mrs), b.CreateMul(j, mcs));
      if (a.mask == AttentionFunction::Mask::additive)
        return b.CreateLoad(f, b.CreateInBoundsGEP(f, mask, at));
      return b.CreateICmpNE(b.CreateLoad(b.getInt8Ty(), b.CreateInBoundsGEP(b.getInt8Ty(), mask, at)), b.getInt8(0));
    };
  r.store = [&](Value *i, Value *e, Value *y) {
    b.CreateStore(y, b.CreateInBoundsGEP(f, out, b.CreateAdd(b.CreateMul(b.CreateAdd(i0, i), b.getInt64(a.dv)), e)));
  };
  r.loop = [&](Value *n, const std::function<void(Value *)> &each) {
    llvm::BasicBlock *pre = b.GetInsertBlock();
    auto *head = llvm::BasicBlock::Create(c, "loop", fn), *step = llvm::BasicBlock::Create(c, "loop.body", fn),
         *exit = llvm::BasicBlock::Create(c, "loop.exit", fn);
    b.CreateBr(head);
    b.SetInsertPoint(head);
    llvm::PHINode *i = b.CreatePHI(i64, 2);
    i->addIncoming(b.getInt64(0), pre);
    b.CreateCondBr(b.CreateICmpSLT(i, n), step, exit);
    b.SetInsertPoint(step);
    each(i);
    Value *next = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(next, b.GetInsertBlock());
    b.CreateBr(head);
    b.SetInsertPoint(exit);
  };
  r.local = [&](llvm::Type *t) { return allocas.CreateAlloca(t); };
  emit_attention_kernel(b, r);
  b.CreateRetVoid();
  allocas.CreateBr(body);
  return fn;
}

} // namespace maxc::codegen
