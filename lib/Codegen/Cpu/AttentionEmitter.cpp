#include "Cpu/AttentionEmitter.h"

#include "MathEmitter.h"

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
