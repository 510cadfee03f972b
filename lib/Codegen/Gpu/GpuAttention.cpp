#include "Gpu/GpuAttention.h"

#include "EntryPointUtil.h"
#include "MathEmitter.h"

#include <llvm/IR/Constants.h>

#include <algorithm>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr unsigned kGroup = 256;             // work-items per workgroup
constexpr int64_t kMaxBlock = 16;            // queries (and keys) per block
constexpr uint64_t kMaxLds = 16 * 1024;      // LDS bytes: 4 workgroups per 64 KiB CU (4 waves per SIMD on gfx9)
constexpr double kSkipFill = -1e4;           // causal fills at or below this: masked blocks skipped
constexpr unsigned kUnroll = 4;              // inner loops (dot products, row updates) unrolled by this

uint64_t lds_floats(int64_t block, int64_t d, int64_t dv) {
  return static_cast<uint64_t>(block * d + block * d + block * dv + block * block + 3 * block);
}

class AttentionKernel {
public:
  AttentionKernel(GemmPhaseBuilder &kb, const AttentionSpec &a)
      : kb_(kb), b_(kb.gemm_builder()), a_(a), bq_(attention_block(a.d, a.dv)) {
    // LDS (floats): Q [bq, d], K [bq, d], V [bq, dv], S [bq, bq], then per
    // query row its running max m, sum l and the block's rescale a.
    q_ = 0;
    k_ = q_ + bq_ * a.d;
    v_ = k_ + bq_ * a.d;
    s_ = v_ + bq_ * a.dv;
    m_ = s_ + bq_ * bq_;
    l_ = m_ + bq_;
    r_ = l_ + bq_;
    per_ = (bq_ * a.dv + kGroup - 1) / kGroup;
  }

  void emit() {
    GpuKernel &k = kb_.gemm_kernel();
    k.grid = {{a_.batch, 1}, {a_.sq, bq_}};
    k.lds_bytes = lds_floats(bq_, a_.d, a_.dv) * 4;
    k.state_bytes = static_cast<uint64_t>(per_) * 4;

    // The query block to LDS; m = -inf, l = 0; accumulators 0.
    {
      llvm::Function *fn = kb_.gemm_begin_phase();
      Value *b = batch(), *q0 = first_query();
      for_items(bq_ * a_.d, [&](Value *item) {
        Value *r = b_.CreateUDiv(item, i64(a_.d)), *e = b_.CreateURem(item, i64(a_.d));
        Value *i = b_.CreateAdd(q0, r);
        store_lds(q_, item, guarded(b_.CreateICmpULT(i, kb_.gemm_dim(a_.sq)), [&] { return a_.load_q(b, i, e); }));
      });
      kb_.gemm_if(b_.CreateICmpULT(lid(), i64(bq_)), [&] {
        store_lds(m_, lid(), llvm::ConstantFP::getInfinity(b_.getFloatTy(), true));
        store_lds(l_, lid(), f32(0));
      });
      for (int64_t t = 0; t < per_; ++t)
        b_.CreateStore(f32(0), acc(t));
      steps_.push_back(kb_.gemm_end_phase(fn));
    }

    std::vector<KernelStep> body;
    // 1. K and V rows of the key block to LDS.
    body.push_back(block_phase([&](Value *b, Value *j0) {
      Value *sk = kb_.gemm_dim(a_.sk);
      for (auto [base, width, load] : {std::make_tuple(k_, a_.d, &a_.load_k), std::make_tuple(v_, a_.dv, &a_.load_v)})
        for_items(bq_ * width, [&, base = base, width = width, load = load](Value *item) {
          Value *r = b_.CreateUDiv(item, i64(width)), *e = b_.CreateURem(item, i64(width));
          Value *j = b_.CreateAdd(j0, r);
          store_lds(base, item, guarded(b_.CreateICmpULT(j, sk), [&] { return (*load)(b, j, e); }));
        });
    }));
    // 2. Scores: scaled dot products, masked.
    body.push_back(block_phase([&](Value *b, Value *j0) {
      Value *q0 = first_query(), *sq = kb_.gemm_dim(a_.sq), *sk = kb_.gemm_dim(a_.sk);
      for_items(bq_ * bq_, [&](Value *item) {
        Value *r = b_.CreateUDiv(item, i64(bq_)), *c = b_.CreateURem(item, i64(bq_));
        Value *i = b_.CreateAdd(q0, r), *j = b_.CreateAdd(j0, c);
        Value *dot = local_f32(0);
        Value *qrow = b_.CreateMul(r, i64(a_.d)), *krow = b_.CreateMul(c, i64(a_.d));
        for_range(i64(a_.d), [&](Value *e) {
          Value *x = load_lds(q_, b_.CreateAdd(qrow, e)), *y = load_lds(k_, b_.CreateAdd(krow, e));
          b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {b_.getFloatTy()},
                                            {x, y, b_.CreateLoad(b_.getFloatTy(), dot)}),
                         dot);
        });
        Value *s = b_.CreateFMul(b_.CreateLoad(b_.getFloatTy(), dot), f32(a_.scale));
        if (a_.causal)
          s = b_.CreateSelect(b_.CreateICmpULE(j, i), s, f32(a_.fill));
        else if (a_.mask)
          s = guarded(b_.CreateAnd(b_.CreateICmpULT(i, sq), b_.CreateICmpULT(j, sk)),
                      [&] { return a_.mask(b, i, j, s); });
        store_lds(s_, item, s);
      });
    }));
    // 3. Online softmax per query row: one work-item each.
    body.push_back(block_phase([&](Value *, Value *j0) {
      kb_.gemm_if(b_.CreateICmpULT(lid(), i64(bq_)), [&] {
        Value *r = lid(), *row = b_.CreateMul(r, i64(bq_));
        // keys of this block that exist: min(bq, sk - j0)
        Value *keys = b_.CreateSub(kb_.gemm_dim(a_.sk), j0);
        keys = b_.CreateSelect(b_.CreateICmpULT(keys, i64(bq_)), keys, i64(bq_));
        Value *m_old = load_lds(m_, r);
        Value *max = local_f32(0);
        b_.CreateStore(m_old, max);
        for_range(keys, [&](Value *c) {
          Value *x = load_lds(s_, b_.CreateAdd(row, c)), *cur = b_.CreateLoad(b_.getFloatTy(), max);
          // a NaN score makes the row NaN (as the reference)
          b_.CreateStore(b_.CreateSelect(b_.CreateOr(b_.CreateFCmpUNO(x, x), b_.CreateFCmpOGT(x, cur)), x, cur), max);
        });
        Value *m_new = b_.CreateLoad(b_.getFloatTy(), max);
        // every score so far -inf: subtract 0 (exp gives 0s, not NaN)
        Value *shift = b_.CreateSelect(b_.CreateFCmpOEQ(m_new, llvm::ConstantFP::getInfinity(b_.getFloatTy(), true)),
                                       f32(0), m_new);
        Value *sum = local_f32(0);
        for_range(i64(bq_), [&](Value *c) {
          Value *at = b_.CreateAdd(row, c);
          Value *p = b_.CreateSelect(b_.CreateICmpULT(c, keys),
                                     emit_exp_f32(b_, b_.CreateFSub(load_lds(s_, at), shift)), f32(0));
          store_lds(s_, at, p);
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(b_.getFloatTy(), sum), p), sum);
        });
        Value *rescale = emit_exp_f32(b_, b_.CreateFSub(m_old, shift));
        store_lds(r_, r, rescale);
        store_lds(m_, r, m_new);
        store_lds(l_, r, b_.CreateFAdd(b_.CreateFMul(load_lds(l_, r), rescale), b_.CreateLoad(b_.getFloatTy(), sum)));
      });
    }));
    // 4. Accumulators: o = o * a + sum_j p_j * V[j].
    body.push_back(block_phase([&](Value *, Value *) {
      for (int64_t t = 0; t < per_; ++t)
        accumulator_item(t, [&](Value *r, Value *c) {
          Value *o = local_f32(0);
          b_.CreateStore(b_.CreateFMul(b_.CreateLoad(b_.getFloatTy(), acc(t)), load_lds(r_, r)), o);
          Value *row = b_.CreateMul(r, i64(bq_));
          for_range(i64(bq_), [&](Value *j) {
            Value *p = load_lds(s_, b_.CreateAdd(row, j));
            Value *v = load_lds(v_, b_.CreateAdd(b_.CreateMul(j, i64(a_.dv)), c));
            b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {b_.getFloatTy()},
                                              {p, v, b_.CreateLoad(b_.getFloatTy(), o)}),
                           o);
          });
          b_.CreateStore(b_.CreateLoad(b_.getFloatTy(), o), acc(t));
        });
    }));
    steps_.push_back(kb_.gemm_loop_step(a_.sk, bq_, std::move(body)));

    // o / l to the result.
    {
      llvm::Function *fn = kb_.gemm_begin_phase();
      Value *b = batch(), *q0 = first_query(), *sq = kb_.gemm_dim(a_.sq);
      for (int64_t t = 0; t < per_; ++t)
        accumulator_item(t, [&](Value *r, Value *c) {
          Value *i = b_.CreateAdd(q0, r);
          kb_.gemm_if(b_.CreateICmpULT(i, sq), [&] {
            a_.store(b, i, c, b_.CreateFDiv(b_.CreateLoad(b_.getFloatTy(), acc(t)), load_lds(l_, r)));
          });
        });
      steps_.push_back(kb_.gemm_end_phase(fn));
    }
    for (KernelStep &s : steps_)
      k.steps.push_back(std::move(s));
  }

private:
  Value *i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  Value *f32(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }
  Value *lid() { return kb_.gemm_local_id(); }

  /// The workgroup's batch entry and first query: workgroup = b * blocks + block.
  Value *query_blocks() {
    Value *sq = kb_.gemm_dim(a_.sq);
    return b_.CreateUDiv(b_.CreateAdd(sq, i64(bq_ - 1)), i64(bq_));
  }
  Value *batch() { return b_.CreateUDiv(kb_.gemm_workgroup(), query_blocks()); }
  Value *first_query() { return b_.CreateMul(b_.CreateURem(kb_.gemm_workgroup(), query_blocks()), i64(bq_)); }

  Value *lds_at(int64_t base, Value *index) {
    return b_.CreateGEP(b_.getFloatTy(), kb_.gemm_lds(), b_.CreateAdd(i64(base), index));
  }
  Value *load_lds(int64_t base, Value *index) { return b_.CreateLoad(b_.getFloatTy(), lds_at(base, index)); }
  void store_lds(int64_t base, Value *index, Value *v) { b_.CreateStore(v, lds_at(base, index)); }
  Value *acc(int64_t t) { return b_.CreateConstGEP1_64(b_.getFloatTy(), kb_.gemm_state(), static_cast<uint64_t>(t)); }

  /// A private f32 variable (an alloca in the phase's entry block).
  Value *local_f32(double init) {
    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    Value *p = entry.CreateAlloca(b_.getFloatTy());
    b_.CreateStore(f32(init), p);
    return p;
  }

  /// cond ? then() : 0, then() evaluated only when cond holds.
  Value *guarded(Value *cond, const std::function<Value *()> &then) { return kb_.gemm_when(cond, then, f32(0)); }

  /// for (i = 0; i < n; ++i) body(i), unrolled by kUnroll at most (fully
  /// unrolled, the D-long dot products and the accumulator updates keep
  /// too many loads in flight: the kernel spilled at D = 80).
  void for_range(Value *n, const std::function<void(Value *)> &body) {
    set_loop_unroll(emit_counted_loop(b_, n, body), kUnroll);
  }

  /// Items lid, lid + group, ... below `count` (a compile-time count).
  void for_items(int64_t count, const std::function<void(Value *)> &body) {
    for (int64_t t = 0; t * kGroup < count; ++t) {
      Value *item = b_.CreateAdd(lid(), i64(t * kGroup));
      if ((t + 1) * kGroup <= count)
        body(item);
      else
        kb_.gemm_if(b_.CreateICmpULT(item, i64(count)), [&] { body(item); });
    }
  }

  /// Accumulator t of this work-item: output (row r, column c) of the block.
  void accumulator_item(int64_t t, const std::function<void(Value *r, Value *c)> &body) {
    Value *item = b_.CreateAdd(lid(), i64(t * kGroup));
    kb_.gemm_if(b_.CreateICmpULT(item, i64(bq_ * a_.dv)),
                [&] { body(b_.CreateUDiv(item, i64(a_.dv)), b_.CreateURem(item, i64(a_.dv))); });
  }

  /// A phase of key block `iteration`; a causal block wholly past the
  /// query block (every score masked to a fill that exp makes 0) does nothing.
  KernelStep block_phase(const std::function<void(Value *b, Value *j0)> &body) {
    llvm::Function *fn = kb_.gemm_begin_phase();
    Value *j0 = b_.CreateMul(kb_.gemm_iteration(), i64(bq_));
    Value *b = batch();
    if (a_.causal && a_.fill <= kSkipFill)
      kb_.gemm_if(b_.CreateICmpULT(j0, b_.CreateAdd(first_query(), i64(bq_))), [&] { body(b, j0); });
    else
      body(b, j0);
    return kb_.gemm_end_phase(fn);
  }

  GemmPhaseBuilder &kb_;
  llvm::IRBuilder<> &b_;
  const AttentionSpec &a_;
  int64_t bq_;
  int64_t q_, k_, v_, s_, m_, l_, r_, per_;
  std::vector<KernelStep> steps_;
};

} // namespace

int64_t attention_block(int64_t d, int64_t dv) {
  int64_t block = kMaxBlock;
  while (block > 1 && lds_floats(block, d, dv) * 4 > kMaxLds)
    block /= 2;
  return block;
}

void emit_attention(GemmPhaseBuilder &kb, const AttentionSpec &spec) { AttentionKernel(kb, spec).emit(); }

} // namespace maxc::codegen
