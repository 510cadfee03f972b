#include "Cpu/RecurrenceEmitter.h"

#include "MathEmitter.h"

#include <llvm/IR/Intrinsics.h>

#include <functional>

namespace maxc::codegen {
namespace {

using llvm::Value;
using namespace recurrence;

struct Emitter {
  llvm::IRBuilder<> &b;
  const RecurrenceKernel &k;
  llvm::Type *f32 = b.getFloatTy();
  Value *odd = nullptr; // i1: the step's index is odd (the GEMVs walk their blocks backwards)
  /// The gates are computed gw columns at a time (<gw x float>, or float).
  int64_t gw = lanes_dividing(k.hidden);
  llvm::Type *gt = gw > 1 ? static_cast<llvm::Type *>(llvm::FixedVectorType::get(f32, unsigned(gw))) : f32;

  /// The widest vector (at most 16 lanes, the target's lanes) dividing n.
  int64_t lanes_dividing(int64_t n) const {
    for (int64_t cand = std::min<int64_t>(k.lanes, 16); cand > 1; cand /= 2)
      if (n % cand == 0)
        return cand;
    return 1;
  }

  Value *fc(double v) { return llvm::ConstantFP::get(gt, v); }
  Value *i64(int64_t v) { return b.getInt64(v); }
  Value *at(Value *ptr, Value *i) { return b.CreateGEP(f32, ptr, i); }
  /// gw floats at ptr[i].
  Value *load(Value *ptr, Value *i) { return b.CreateAlignedLoad(gt, at(ptr, i), llvm::Align(4)); }
  void store(Value *v, Value *ptr, Value *i) { b.CreateAlignedStore(v, at(ptr, i), llvm::Align(4)); }
  Value *fma(Value *x, Value *y, Value *z) { return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {gt}, {x, y, z}); }
  /// for (j = 0; j < H; j += gw) body(j)
  void columns(const std::function<void(Value *)> &body) {
    loop(i64(k.hidden / gw), [&](Value *jc) { body(b.CreateMul(jc, i64(gw))); });
  }

  /// for (i = 0; i < n; ++i) body(i)
  void loop(Value *n, const std::function<void(Value *)> &body) {
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock *pre = b.GetInsertBlock();
    auto *head = llvm::BasicBlock::Create(b.getContext(), "rec.head", fn);
    auto *loop_body = llvm::BasicBlock::Create(b.getContext(), "rec.body", fn);
    auto *exit = llvm::BasicBlock::Create(b.getContext(), "rec.exit", fn);
    b.CreateBr(head);
    b.SetInsertPoint(head);
    llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2);
    i->addIncoming(i64(0), pre);
    b.CreateCondBr(b.CreateICmpSLT(i, n), loop_body, exit);
    b.SetInsertPoint(loop_body);
    body(i);
    i->addIncoming(b.CreateAdd(i, i64(1)), b.GetInsertBlock());
    b.CreateBr(head);
    b.SetInsertPoint(exit);
  }

  Value *min(Value *x, Value *y) { return b.CreateSelect(b.CreateFCmpOLT(x, y), x, y); }
  Value *max(Value *x, Value *y) { return b.CreateSelect(b.CreateFCmpOGT(x, y), x, y); }
  Value *clipped(Value *x) { return k.clip >= 0 ? min(max(x, fc(-k.clip)), fc(k.clip)) : x; }

  Value *act(const Activation &a, Value *x) {
    switch (a.act) {
    case Act::relu: return b.CreateSelect(b.CreateFCmpUGT(x, fc(0)), x, fc(0)); // NaN stays
    case Act::tanh: return emit_tanh_f32(b, x);
    case Act::sigmoid: return emit_sigmoid_f32(b, x);
    case Act::affine: return b.CreateFAdd(b.CreateFMul(fc(a.alpha), x), fc(a.beta));
    case Act::leaky_relu: return b.CreateSelect(b.CreateFCmpOLT(x, fc(0)), b.CreateFMul(fc(a.alpha), x), x);
    case Act::thresholded_relu: return b.CreateSelect(b.CreateFCmpOGT(x, fc(a.alpha)), x, fc(0));
    case Act::scaled_tanh: return b.CreateFMul(fc(a.alpha), emit_tanh_f32(b, b.CreateFMul(fc(a.beta), x)));
    case Act::hard_sigmoid: {
      Value *v = b.CreateFAdd(b.CreateFMul(fc(a.alpha), x), fc(a.beta));
      return b.CreateSelect(b.CreateFCmpOGT(v, fc(0)), b.CreateSelect(b.CreateFCmpOLT(v, fc(1)), v, fc(1)), fc(0));
    }
    case Act::elu:
      return b.CreateSelect(b.CreateFCmpOGT(x, fc(0)), x,
                            b.CreateFMul(fc(a.alpha), b.CreateFSub(emit_exp_f32(b, x), fc(1))));
    case Act::softsign: {
      Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      return b.CreateFDiv(x, b.CreateFAdd(fc(1), ax));
    }
    case Act::softplus: {
      Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      Value *l = emit_log_f32(b, b.CreateFAdd(fc(1), emit_exp_f32(b, b.CreateFNeg(ax))));
      return b.CreateFAdd(b.CreateSelect(b.CreateFCmpOGT(x, fc(0)), x, fc(0)), l);
    }
    }
    return x;
  }

  /// out[j] = (init ? init[j] : 0) + sum_k x[k] * R[j, k] for the columns of
  /// blocks [b0, b1): K/W vector accumulators over H rows per block.
  void gemv(int64_t b0, int64_t b1, Value *x, Value *init, Value *out) {
    gemv_blocks(i64(b0), i64(b1 - b0), x, init, out);
  }

  /// gemv's loop over `count` blocks from `first` (i64 values).
  void gemv_blocks(Value *first, Value *count, Value *x, Value *init, Value *out) {
    const int64_t K = k.block, H = k.hidden, w = lanes_dividing(K);
    const int64_t nv = K / w;
    llvm::Type *vt = w > 1 ? static_cast<llvm::Type *>(llvm::FixedVectorType::get(f32, unsigned(w))) : f32;
    std::vector<Value *> acc;
    for (int64_t v = 0; v < nv; ++v)
      acc.push_back(k.local(vt));
    auto vload = [&](Value *ptr, Value *i) { return b.CreateAlignedLoad(vt, at(ptr, i), llvm::Align(4)); };
    loop(count, [&](Value *jb0) {
      // Odd steps walk the blocks backwards: the blocks the last step read
      // most recently are still in cache when this one starts.
      Value *jb = b.CreateAdd(b.CreateSelect(odd, b.CreateSub(b.CreateSub(count, i64(1)), jb0), jb0), first);
      Value *col = b.CreateMul(jb, i64(K));
      for (int64_t v = 0; v < nv; ++v)
        b.CreateStore(init ? static_cast<Value *>(vload(init, b.CreateAdd(col, i64(v * w)))) : llvm::Constant::getNullValue(vt), acc[v]);
      Value *block = at(k.r, b.CreateMul(jb, i64(H * K)));
      loop(i64(H), [&](Value *kk) {
        Value *xk = b.CreateAlignedLoad(f32, at(x, kk), llvm::Align(4));
        Value *xs = w > 1 ? b.CreateVectorSplat(static_cast<unsigned>(w), xk) : xk;
        Value *row = at(block, b.CreateMul(kk, i64(K)));
        for (int64_t v = 0; v < nv; ++v) {
          Value *a = b.CreateLoad(vt, acc[v]);
          Value *wv = vload(row, i64(v * w));
          b.CreateStore(b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {xs, wv, a}), acc[v]);
        }
      });
      for (int64_t v = 0; v < nv; ++v)
        b.CreateAlignedStore(b.CreateLoad(vt, acc[v]), at(out, b.CreateAdd(col, i64(v * w))), llvm::Align(4));
    });
  }

  /// One batch row's step: state hb/cb, input projection xb, Y row yb.
  void step(Value *hb, Value *cb, Value *xb, Value *yb) {
    const int64_t H = k.hidden, K = k.block, GH = gates_of(k.cell) * H, per_gate = H / K;
    const std::vector<Activation> &f = k.acts;
    auto col = [&](int64_t gate, Value *j) { return b.CreateAdd(j, i64(gate * H)); };
    if (k.cell == Cell::lstm) {
      gemv(0, GH / K, hb, xb, k.g);
      columns([&](Value *j) {
        Value *gi = load(k.g, j), *go = load(k.g, col(1, j)), *gf = load(k.g, col(2, j)), *gc = load(k.g, col(3, j));
        Value *cj = load(cb, j);
        if (k.p) {
          gi = fma(load(k.p, j), cj, gi);
          gf = fma(load(k.p, col(2, j)), cj, gf);
        }
        Value *i = act(f[0], clipped(gi));
        Value *fg = k.input_forget ? b.CreateFSub(fc(1), i) : act(f[0], clipped(gf));
        Value *cn = b.CreateFAdd(b.CreateFMul(fg, cj), b.CreateFMul(i, act(f[1], clipped(gc))));
        if (k.p)
          go = fma(load(k.p, col(1, j)), cn, go);
        Value *hn = b.CreateFMul(act(f[0], clipped(go)), act(f[2], cn));
        store(cn, cb, j);
        store(hn, hb, j);
        store(hn, yb, j);
      });
    } else if (k.cell == Cell::gru) {
      if (k.lbr) {
        gemv(0, 2 * per_gate, hb, xb, k.g);
        gemv(2 * per_gate, 3 * per_gate, hb, nullptr, k.g);
      } else {
        gemv(0, 2 * per_gate, hb, xb, k.g);
      }
      columns([&](Value *j) {
        Value *z = act(f[0], clipped(load(k.g, j)));
        Value *rg = act(f[0], clipped(load(k.g, col(1, j))));
        Value *hj = load(hb, j);
        if (k.lbr) {
          Value *rec = b.CreateFAdd(load(k.g, col(2, j)), load(k.rbh, j));
          Value *n = act(f[1], clipped(fma(rg, rec, load(xb, col(2, j)))));
          Value *hn = fma(z, b.CreateFSub(hj, n), n); // (1-z)n + zh
          store(hn, hb, j);
          store(hn, yb, j);
        } else {
          store(z, k.g, j);
          store(b.CreateFMul(rg, hj), k.tmp, j);
        }
      });
      if (!k.lbr) {
        gemv(2 * per_gate, 3 * per_gate, k.tmp, xb, k.g);
        columns([&](Value *j) {
          Value *z = load(k.g, j), *hj = load(hb, j);
          Value *n = act(f[1], clipped(load(k.g, col(2, j))));
          Value *hn = fma(z, b.CreateFSub(hj, n), n);
          store(hn, hb, j);
          store(hn, yb, j);
        });
      }
    } else {
      gemv(0, per_gate, hb, xb, k.g);
      columns([&](Value *j) {
        Value *hn = act(f[0], clipped(load(k.g, j)));
        store(hn, hb, j);
        store(hn, yb, j);
      });
    }
  }

  void run() {
    const int64_t H = k.hidden, GH = gates_of(k.cell) * H;
    loop(k.seq, [&](Value *s) {
      odd = b.CreateICmpNE(b.CreateAnd(s, i64(1)), i64(0));
      Value *t = k.reverse ? b.CreateSub(b.CreateSub(k.seq, i64(1)), s) : s;
      loop(k.batch, [&](Value *row) {
        Value *tb = b.CreateAdd(b.CreateMul(t, k.batch), row);
        Value *yb = at(k.y, b.CreateMul(tb, i64(H)));
        Value *hb = at(k.h, b.CreateMul(row, i64(H)));
        Value *cb = k.c ? at(k.c, b.CreateMul(row, i64(H))) : nullptr;
        Value *xb = at(k.proj, b.CreateMul(tb, i64(GH)));
        if (!k.length) {
          step(hb, cb, xb, yb);
          return;
        }
        // A row past its length keeps its state; its Y row is zero.
        llvm::Function *fn = b.GetInsertBlock()->getParent();
        auto *active = llvm::BasicBlock::Create(b.getContext(), "rec.active", fn);
        auto *done = llvm::BasicBlock::Create(b.getContext(), "rec.done", fn);
        auto *idle = llvm::BasicBlock::Create(b.getContext(), "rec.idle", fn);
        b.CreateCondBr(b.CreateICmpSLT(t, k.length(row)), active, idle);
        b.SetInsertPoint(idle);
        loop(i64(H), [&](Value *j) {
          b.CreateAlignedStore(llvm::ConstantFP::get(f32, 0.0), at(yb, j), llvm::Align(4));
        });
        b.CreateBr(done);
        b.SetInsertPoint(active);
        step(hb, cb, xb, yb);
        b.CreateBr(done);
        b.SetInsertPoint(done);
      });
    });
  }
};

} // namespace

void emit_recurrence_kernel(llvm::IRBuilder<> &b, const RecurrenceKernel &k) { Emitter{b, k}.run(); }

} // namespace maxc::codegen
