#include "Gpu/GpuMatmul.h"

#include "ElementalEmitter.h"
#include "EntryPointUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <atomic>
#include <cctype>
#include <cstdlib>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr int64_t kMacro = 64;     // output rows and columns per workgroup (128: NVIDIA f32, 8 x 8 micro-tiles)
constexpr int64_t kDepth = 16;     // K per LDS tile (32 for 16-bit operands)
constexpr unsigned kGroup = 256;   // work-items per workgroup
constexpr int64_t kBlock = 16;     // a matrix instruction's output block is 16 x 16
constexpr unsigned kWavesPerEu = 4; // at most 128 VGPRs (+ AGPRs): occupancy without spills

bool starts_with(const std::string &s, const char *p) { return s.rfind(p, 0) == 0; }

bool is_mma_sync(MatrixInstruction i) {
  return i == MatrixInstruction::mma_m16n8k16_f16_x2 || i == MatrixInstruction::mma_m16n8k16_bf16_x2;
}

bool is_mfma(MatrixInstruction i) {
  return i == MatrixInstruction::mfma_f32_16x16x4f32 || i == MatrixInstruction::mfma_f32_16x16x16f16 ||
         i == MatrixInstruction::mfma_f32_16x16x16bf16_1k;
}

/// The LLVM type of a lane's operand slot: float (one f32), <E x half>, <E x
/// i16>: the operand's memory type (ElementalEmitter.h).
llvm::Type *element_type(llvm::LLVMContext &c, DType d) { return memory_type(c, d); }

llvm::Type *operand_type(llvm::LLVMContext &c, const MatrixCore &mc) {
  llvm::Type *e = element_type(c, mc.operand);
  return mc.elements == 1 ? e : llvm::FixedVectorType::get(e, mc.elements);
}

llvm::Type *result_type(llvm::LLVMContext &c, const MatrixCore &mc) {
  return llvm::FixedVectorType::get(llvm::Type::getFloatTy(c), mc.results);
}

uint64_t element_bytes(DType d) { return dtype_size(d); }

/// An operand element (f32, half or bf16 bits) as f32, exactly.
Value *to_f32(llvm::IRBuilder<> &b, Value *v, DType d) {
  if (d == DType::f16)
    return b.CreateFPExt(v, b.getFloatTy());
  if (d == DType::bf16)
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, b.getInt32Ty()), 16), b.getFloatTy());
  return v;
}

/// An f32 value that is exactly representable in `d` (a loaded f16/bf16
/// element) to that operand type.
Value *from_f32(llvm::IRBuilder<> &b, Value *v, DType d) {
  if (d == DType::f16)
    return b.CreateFPTrunc(v, b.getHalfTy());
  if (d == DType::bf16)
    return b.CreateTrunc(b.CreateLShr(b.CreateBitCast(v, b.getInt32Ty()), 16), b.getInt16Ty());
  return v;
}

// ---- lane layouts (the kernel's side: where a lane's element comes from) ----
//
// MFMA 16x16xK, one block, E = K / 4 operand elements per lane (AMD's matrix
// instruction calculator, gfx90a/gfx942):
//   A: lane l, element e  holds A[i = l % 16][k = E * (l / 16) + e]
//   B: lane l, element e  holds B[k = E * (l / 16) + e][j = l % 16]
//   D: lane l, register r holds D[i = 4 * (l / 16) + r][j = l % 16]
// WMMA 16x16x16 wave32 (RDNA3 ISA; lanes 16-31 repeat lanes 0-15's A and B):
//   A: lane l, element e  holds A[i = l % 16][k = e]
//   B: lane l, element e  holds B[k = e][j = l % 16]
//   D: lane l, register r holds D[i = 2 * r + l / 16][j = l % 16]
// NVIDIA mma.sync m16n8k16 .row.col f32 += f16/bf16 (PTX ISA, "Matrix
// fragments for mma.m16n8k16 with floating point type"; g = l / 4, t = l % 4),
// two of them per 16 x 16 block, h = 0, 1 the column half:
//   A: lane l, element e      holds A[i = g + 8 ((e / 2) % 2)][k = 2 t + e % 2 + 8 (e / 4)]
//   B: lane l, element 4h + e holds B[k = 2 t + e % 2 + 8 (e / 2)][j = g + 8 h]   (e < 4)
//   D: lane l, register 4h + r holds D[i = g + 8 (r / 2)][j = 2 t + r % 2 + 8 h]  (r < 4)

struct Coord {
  Value *row, *col;
};

std::atomic<int> g_mma_mutation{0}; // MmaLayoutMutation (tests)

Coord a_element(llvm::IRBuilder<> &b, const MatrixCore &mc, Value *lane, unsigned e) {
  if (is_mma_sync(mc.instruction)) {
    if (g_mma_mutation.load() == 1 && (e == 0 || e == 2))
      e = 2 - e;
    Value *g = b.CreateUDiv(lane, b.getInt64(4)), *t = b.CreateURem(lane, b.getInt64(4));
    return {b.CreateAdd(g, b.getInt64(8 * ((e / 2) % 2))), b.CreateAdd(b.CreateMul(t, b.getInt64(2)), b.getInt64(e % 2 + 8 * (e / 4)))};
  }
  Value *i = b.CreateURem(lane, b.getInt64(16));
  if (is_mfma(mc.instruction))
    return {i, b.CreateAdd(b.CreateMul(b.CreateUDiv(lane, b.getInt64(16)), b.getInt64(mc.elements)), b.getInt64(e))};
  return {i, b.getInt64(e)};
}

Coord b_element(llvm::IRBuilder<> &b, const MatrixCore &mc, Value *lane, unsigned e) {
  if (is_mma_sync(mc.instruction)) {
    Value *g = b.CreateUDiv(lane, b.getInt64(4)), *t = b.CreateURem(lane, b.getInt64(4));
    unsigned h = e / 4, q = e % 4;
    return {b.CreateAdd(b.CreateMul(t, b.getInt64(2)), b.getInt64(q % 2 + 8 * (q / 2))), b.CreateAdd(g, b.getInt64(8 * h))};
  }
  Coord t = a_element(b, mc, lane, e); // B's layout is A's transposed
  return {t.col, t.row};
}

Coord d_element(llvm::IRBuilder<> &b, const MatrixCore &mc, Value *lane, Value *r) {
  if (is_mma_sync(mc.instruction)) {
    Value *g = b.CreateUDiv(lane, b.getInt64(4)), *t = b.CreateURem(lane, b.getInt64(4));
    Value *h = b.CreateUDiv(r, b.getInt64(4)), *q = b.CreateURem(r, b.getInt64(4));
    return {b.CreateAdd(g, b.CreateMul(b.CreateUDiv(q, b.getInt64(2)), b.getInt64(8))),
            b.CreateAdd(b.CreateAdd(b.CreateMul(t, b.getInt64(2)), b.CreateURem(q, b.getInt64(2))), b.CreateMul(h, b.getInt64(8)))};
  }
  Value *j = b.CreateURem(lane, b.getInt64(16)), *half = b.CreateUDiv(lane, b.getInt64(16));
  if (is_mfma(mc.instruction))
    return {b.CreateAdd(b.CreateMul(half, b.getInt64(4)), r), j};
  return {b.CreateAdd(b.CreateMul(r, b.getInt64(2)), half), j};
}

// State slots are only element-aligned (lanes' states are packed): vector
// loads and stores say so, not the vector's ABI alignment.
llvm::Align slot_align(llvm::Type *t) { return llvm::Align(t->getScalarSizeInBits() / 8); }
llvm::Value *load_slot(llvm::IRBuilder<> &b, llvm::Type *t, llvm::Value *p) { return b.CreateAlignedLoad(t, p, slot_align(t)); }
void store_slot(llvm::IRBuilder<> &b, llvm::Value *v, llvm::Value *p) { b.CreateAlignedStore(v, p, slot_align(v->getType())); }

/// for (i = 0; i < n; ++i) body(i)
void ir_loop(llvm::IRBuilder<> &b, Value *n, const std::function<void(Value *)> &body) {
  emit_counted_loop(b, n, body, "mma.");
}

/// The emulation of one instruction kind: an internal function
///   void (ptr lane_states, i64 state_bytes, i64 a, i64 b, i64 c)
/// computing D = A * B + C for every lane of one wave. Every operand is read
/// from the lane and element that the documented layout assigns it (the
/// inverse of a_element/b_element, written independently of them).
llvm::Function *emulation_function(llvm::Module &m, const MatrixCore &mc) {
  std::string name = "maxc.emulate.mma." + std::to_string(static_cast<int>(mc.instruction));
  if (llvm::Function *f = m.getFunction(name))
    return f;
  llvm::LLVMContext &ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty(), *f32 = b.getFloatTy();
  auto *fn = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64, i64, i64}, false),
                                    llvm::GlobalValue::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::NoInline);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  Value *states = fn->getArg(0), *stride = fn->getArg(1), *a_off = fn->getArg(2), *b_off = fn->getArg(3),
        *c_off = fn->getArg(4);
  llvm::Type *et = element_type(ctx, mc.operand);
  uint64_t esz = element_bytes(mc.operand);
  bool mfma = is_mfma(mc.instruction), mma_sync = is_mma_sync(mc.instruction);
  auto slot = [&](Value *lane, Value *offset) {
    return b.CreateGEP(b.getInt8Ty(), states, b.CreateAdd(b.CreateMul(lane, stride), offset));
  };
  auto operand = [&](Value *lane, Value *base, Value *elem) {
    Value *p = b.CreateGEP(b.getInt8Ty(), slot(lane, base), b.CreateMul(elem, b.getInt64(static_cast<int64_t>(esz))));
    return to_f32(b, b.CreateLoad(et, p), mc.operand);
  };
  Value *sixteen = b.getInt64(16), *E = b.getInt64(mc.elements);
  ir_loop(b, b.getInt64(mc.wave), [&](Value *lane) {
    ir_loop(b, b.getInt64(mc.results), [&](Value *r) {
      Coord d = d_element(b, mc, lane, r);
      Value *cp = b.CreateGEP(b.getInt8Ty(), slot(lane, c_off), b.CreateMul(r, b.getInt64(4)));
      Value *acc = b.CreateAlloca(f32);
      b.CreateStore(b.CreateLoad(f32, cp), acc);
      ir_loop(b, b.getInt64(mc.k), [&](Value *k) {
        Value *a_lane, *a_elem, *b_lane, *b_elem;
        if (mma_sync) {
          // A[i][k]: lane 4 (i % 8) + (k % 8) / 2, element k % 2 + 2 (i / 8) + 4 (k / 8);
          // B[k][j]: lane 4 (j % 8) + (k % 8) / 2, element 4 (j / 8) + k % 2 + 2 (k / 8).
          Value *eight = b.getInt64(8), *two = b.getInt64(2), *four = b.getInt64(4);
          Value *kq = b.CreateUDiv(b.CreateURem(k, eight), two), *k2 = b.CreateURem(k, two), *k8 = b.CreateUDiv(k, eight);
          a_lane = b.CreateAdd(b.CreateMul(b.CreateURem(d.row, eight), four), kq);
          a_elem = b.CreateAdd(k2, b.CreateAdd(b.CreateMul(b.CreateUDiv(d.row, eight), two), b.CreateMul(k8, four)));
          b_lane = b.CreateAdd(b.CreateMul(b.CreateURem(d.col, eight), four), kq);
          b_elem = b.CreateAdd(b.CreateMul(b.CreateUDiv(d.col, eight), four), b.CreateAdd(k2, b.CreateMul(k8, two)));
        } else if (mfma) {
          // A[i][k] is in lane i + 16 * (k / E), element k % E; B[k][j] likewise.
          a_lane = b.CreateAdd(d.row, b.CreateMul(b.CreateUDiv(k, E), sixteen));
          b_lane = b.CreateAdd(d.col, b.CreateMul(b.CreateUDiv(k, E), sixteen));
          a_elem = b_elem = b.CreateURem(k, E);
        } else {
          // Row i of A is in lanes i and i + 16 (element k); this lane's half
          // reads its own copy, so both halves must hold it.
          Value *half = b.CreateMul(b.CreateUDiv(lane, sixteen), sixteen);
          a_lane = b.CreateAdd(d.row, half);
          b_lane = b.CreateAdd(d.col, half);
          a_elem = b_elem = k;
        }
        Value *x = operand(a_lane, a_off, a_elem), *y = operand(b_lane, b_off, b_elem);
        b.CreateStore(b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {f32}, {x, y, b.CreateLoad(f32, acc)}), acc);
      });
      b.CreateStore(b.CreateLoad(f32, acc), cp);
    });
  });
  b.CreateRetVoid();
  // The allocas above are in loop bodies: move them to the entry block.
  llvm::BasicBlock &entry = fn->getEntryBlock();
  std::vector<llvm::AllocaInst *> allocas;
  for (llvm::BasicBlock &bb : *fn)
    for (llvm::Instruction &inst : bb)
      if (auto *a = llvm::dyn_cast<llvm::AllocaInst>(&inst); a && &bb != &entry)
        allocas.push_back(a);
  for (llvm::AllocaInst *a : allocas)
    a->moveBefore(&*entry.getFirstInsertionPt());
  return fn;
}

// ---- the kernel ----

class MatrixCoreGemm {
public:
  MatrixCoreGemm(GemmPhaseBuilder &kb, const GemmSpec &gm, const MatrixCore &mc, unsigned micro)
      : kb_(kb), gm_(gm), mc_(mc), b_(kb.gemm_builder()), ctx_(b_.getContext()) {
    micro_ = mc_ ? 4 : micro;
    macro_ = 16 * micro_;
    op_ = mc_ ? mc_.operand : DType::f32;
    esz_ = element_bytes(op_);
    // 16 bytes of consecutive elements per work-item and operand per
    // K-tile: 4 f32 (K-tile 16) or 8 f16/bf16 (K-tile 32).
    vec_ = 16 / static_cast<int64_t>(esz_);
    depth_ = kDepth * vec_ / 4;
    buffer_ = 2 * macro_ * depth_;
    if (mc_) {
      waves_ = kGroup / mc_.wave;
      waves_n_ = 2;
      waves_m_ = waves_ / waves_n_;
      blocks_m_ = kMacro / kBlock / waves_m_;
      blocks_n_ = kMacro / kBlock / waves_n_;
      ksteps_ = static_cast<unsigned>(depth_ / mc_.k);
      acc_bytes_ = uint64_t(blocks_m_ * blocks_n_ * mc_.results) * 4;
      frag_bytes_ = mc_.elements * esz_;
      a_bytes_ = blocks_m_ * ksteps_ * frag_bytes_;
      b_bytes_ = blocks_n_ * ksteps_ * frag_bytes_;
    } else {
      acc_bytes_ = uint64_t(micro_ * micro_) * 4; // a micro x micro tile per work-item
    }
  }

  void emit() {
    GpuKernel &k = kb_.gemm_kernel();
    k.workgroup_size = kGroup;
    k.waves_per_eu = kWavesPerEu;
    k.grid = {{gm_.batch, 1}, {gm_.m, macro_}, {gm_.n, macro_}};
    k.lds_bytes = 2 * buffer_ * esz_; // double-buffered
    k.state_bytes = (acc_bytes_ + a_bytes_ + b_bytes_ + 15) / 16 * 16;
    {
      // Prologue: zero accumulators, stage K-tile 0 into buffer 0.
      llvm::Function *fn = kb_.gemm_begin_phase();
      stage(c64(0), c64(0));
      if (mc_)
        for (unsigned s = 0; s < blocks_m_ * blocks_n_; ++s)
          store_slot(b_, llvm::Constant::getNullValue(result_type(ctx_, mc_)), state_at(c_slot(s / blocks_n_, s % blocks_n_)));
      else
        for (unsigned s = 0; s < micro_ * micro_; ++s)
          b_.CreateStore(llvm::ConstantFP::get(b_.getFloatTy(), 0.0), state_at(4 * s));
      k.steps.push_back(kb_.gemm_end_phase(fn));
    }
    // Trip t: stage K-tile t + 1 into buffer (t + 1) % 2 while reading tile t
    // from buffer t % 2 (no barrier between them), then the wave's matrix ops;
    // one barrier per trip (before its phase).
    std::vector<KernelStep> body;
    {
      llvm::Function *fn = kb_.gemm_begin_phase();
      Value *t = kb_.gemm_iteration();
      Value *current = b_.CreateAnd(t, c64(1));
      stage(b_.CreateAdd(t, c64(1)), b_.CreateXor(current, c64(1)));
      if (mc_)
        fragments(current);
      else
        scalar_tile(current);
      body.push_back(kb_.gemm_end_phase(fn));
    }
    if (mc_) {
      KernelStep ops;
      for (unsigned s = 0; s < ksteps_; ++s)
        for (unsigned bm = 0; bm < blocks_m_; ++bm)
          for (unsigned bn = 0; bn < blocks_n_; ++bn)
            ops.wave_ops.push_back({static_cast<int>(mc_.instruction), a_slot(bm, s), b_slot(bn, s), c_slot(bm, bn)});
      body.push_back(std::move(ops));
    }
    KernelStep loop = kb_.gemm_loop_step(gm_.k, depth_, std::move(body));
    loop.unroll = 1; // one barrier per K-tile; unrolling only grows code and registers
    k.steps.push_back(std::move(loop));
    k.steps.push_back(store());
  }

private:
  uint64_t c_slot(unsigned bm, unsigned bn) const { return (bm * blocks_n_ + bn) * mc_.results * 4; }
  uint64_t a_slot(unsigned bm, unsigned s) const { return acc_bytes_ + (bm * ksteps_ + s) * frag_bytes_; }
  uint64_t b_slot(unsigned bn, unsigned s) const { return acc_bytes_ + a_bytes_ + (bn * ksteps_ + s) * frag_bytes_; }

  Value *state_at(uint64_t offset) { return b_.CreateConstGEP1_64(b_.getInt8Ty(), kb_.gemm_state(), offset); }
  Value *c64(int64_t v) { return b_.getInt64(v); }

  /// The workgroup's batch index and macro-tile origin.
  void origin(Value *&batch, Value *&row0, Value *&col0) {
    Value *tiles_n = ceil_div(kb_.gemm_dim(gm_.n)), *tiles_m = ceil_div(kb_.gemm_dim(gm_.m));
    Value *wg = kb_.gemm_workgroup();
    Value *tn = b_.CreateURem(wg, tiles_n), *rest = b_.CreateUDiv(wg, tiles_n);
    // One batch entry: `rest` is the row tile (no division by a tile count
    // that may be dynamic: the MLP's rows are its batch).
    bool single = gm_.batch == Dim(1);
    row0 = b_.CreateMul(single ? rest : b_.CreateURem(rest, tiles_m), c64(macro_));
    col0 = b_.CreateMul(tn, c64(macro_));
    batch = single ? c64(0) : b_.CreateUDiv(rest, tiles_m);
  }

  Value *ceil_div(Value *x) { return b_.CreateUDiv(b_.CreateAdd(x, c64(macro_ - 1)), c64(macro_)); }

  /// LDS: A tile [64][16] then B tile [16][64], in the operand type.
  /// (Two buffers of buffer_ elements, `buf` 0 or 1.)
  Value *lds_a(Value *buf, Value *i, Value *k) {
    Value *at = b_.CreateAdd(b_.CreateMul(buf, c64(buffer_)), b_.CreateAdd(b_.CreateMul(i, c64(depth_)), k));
    return b_.CreateGEP(element_type(ctx_, op_), kb_.gemm_lds(), at);
  }
  Value *lds_b(Value *buf, Value *k, Value *j) {
    Value *at = b_.CreateAdd(b_.CreateMul(buf, c64(buffer_)),
                             b_.CreateAdd(c64(macro_ * depth_), b_.CreateAdd(b_.CreateMul(k, c64(macro_)), j)));
    return b_.CreateGEP(element_type(ctx_, op_), kb_.gemm_lds(), at);
  }

  /// Global → LDS: each work-item 4 consecutive k of one A row and 4
  /// consecutive columns of one B row; zeros outside the matrices.
  void stage(Value *tile, Value *buf) {
    Value *batch, *row0, *col0;
    origin(batch, row0, col0);
    Value *lid = kb_.gemm_local_id(), *k0 = b_.CreateMul(tile, c64(depth_));
    Value *m = kb_.gemm_dim(gm_.m), *n = kb_.gemm_dim(gm_.n), *kk = kb_.gemm_dim(gm_.k);
    Value *zero = llvm::ConstantFP::get(gm_.acc_type, 0.0);
    int64_t a_items = depth_ / vec_, b_items = macro_ / vec_; // work-items per A row, per B row
    // 64 A rows and kGroup / b_items B rows per pass; macro_ / 64 passes.
    for (int64_t p = 0; p < macro_ / kMacro; ++p) {
      Value *ar = b_.CreateAdd(b_.CreateUDiv(lid, c64(a_items)), c64(kMacro * p));
      Value *ak = b_.CreateMul(b_.CreateURem(lid, c64(a_items)), c64(vec_));
      Value *bk = b_.CreateAdd(b_.CreateUDiv(lid, c64(b_items)), c64(int64_t(kGroup) / b_items * p));
      Value *bc = b_.CreateMul(b_.CreateURem(lid, c64(b_items)), c64(vec_));
      Value *row = b_.CreateAdd(row0, ar), *krow = b_.CreateAdd(k0, bk);
      Value *row_ok = b_.CreateICmpULT(row, m), *krow_ok = b_.CreateICmpULT(krow, kk);
      // vec_ consecutive elements per operand; when all are inside the matrix
      // they are loaded without per-element masks (adjacent loads the backend
      // merges into one 128-bit load where the operand is contiguous).
      auto stage_run = [&](Value *all_ok, const std::function<Value *(int64_t)> &in_bounds,
                      const std::function<Value *(int64_t)> &load, const std::function<Value *(int64_t)> &at) {
        llvm::Function *f = b_.GetInsertBlock()->getParent();
        auto *fast = llvm::BasicBlock::Create(ctx_, "stage.full", f);
        auto *edge = llvm::BasicBlock::Create(ctx_, "stage.edge", f);
        auto *done = llvm::BasicBlock::Create(ctx_, "stage.done", f);
        b_.CreateCondBr(all_ok, fast, edge);
        b_.SetInsertPoint(fast);
        std::vector<Value *> full;
        for (int64_t q = 0; q < vec_; ++q)
          full.push_back(load(q));
        llvm::BasicBlock *fast_end = b_.GetInsertBlock();
        b_.CreateBr(done);
        b_.SetInsertPoint(edge);
        std::vector<Value *> masked;
        for (int64_t q = 0; q < vec_; ++q)
          masked.push_back(kb_.gemm_when(in_bounds(q), [&] { return load(q); }, zero));
        llvm::BasicBlock *edge_end = b_.GetInsertBlock();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        std::vector<Value *> v;
        for (int64_t q = 0; q < vec_; ++q) {
          llvm::PHINode *phi = b_.CreatePHI(gm_.acc_type, 2);
          phi->addIncoming(full[q], fast_end);
          phi->addIncoming(masked[q], edge_end);
          v.push_back(phi);
        }
        for (int64_t q = 0; q < vec_; ++q)
          b_.CreateStore(from_f32(b_, v[q], op_), at(q));
      };
      Value *ka = b_.CreateAdd(k0, ak), *cb = b_.CreateAdd(col0, bc);
      stage_run(b_.CreateAnd(row_ok, b_.CreateICmpULT(b_.CreateAdd(ka, c64(vec_ - 1)), kk)),
           [&](int64_t q) { return b_.CreateAnd(row_ok, b_.CreateICmpULT(b_.CreateAdd(ka, c64(q)), kk)); },
           [&](int64_t q) { return gm_.load_a(batch, row, b_.CreateAdd(ka, c64(q))); },
           [&](int64_t q) { return lds_a(buf, ar, b_.CreateAdd(ak, c64(q))); });
      stage_run(b_.CreateAnd(krow_ok, b_.CreateICmpULT(b_.CreateAdd(cb, c64(vec_ - 1)), n)),
           [&](int64_t q) { return b_.CreateAnd(krow_ok, b_.CreateICmpULT(b_.CreateAdd(cb, c64(q)), n)); },
           [&](int64_t q) { return gm_.load_b(batch, krow, b_.CreateAdd(cb, c64(q))); },
           [&](int64_t q) { return lds_b(buf, bk, b_.CreateAdd(bc, c64(q))); });
    }
  }

  void wave_position(Value *&lane, Value *&wrow, Value *&wcol) {
    Value *lid = kb_.gemm_local_id();
    lane = b_.CreateURem(lid, c64(mc_.wave));
    Value *w = b_.CreateUDiv(lid, c64(mc_.wave));
    wrow = b_.CreateMul(b_.CreateUDiv(w, c64(waves_n_)), c64(blocks_m_ * kBlock));
    wcol = b_.CreateMul(b_.CreateURem(w, c64(waves_n_)), c64(blocks_n_ * kBlock));
  }

  /// LDS → this lane's A and B operands, in the instruction's lane layout.
  void fragments(Value *buf) {
    Value *lane, *wrow, *wcol;
    wave_position(lane, wrow, wcol);
    llvm::Type *et = element_type(ctx_, op_), *ot = operand_type(ctx_, mc_);
    auto gather = [&](bool is_a, unsigned block, unsigned s) {
      Value *v = llvm::UndefValue::get(ot);
      for (unsigned e = 0; e < mc_.elements; ++e) {
        Value *x;
        if (is_a && is_mma_sync(mc_.instruction) && e % 2 == 0) {
          // Elements e, e + 1 are A[i][k], A[i][k + 1] with k even: one
          // 32-bit LDS load (the buffers, rows and k are 4-byte aligned).
          Coord c = a_element(b_, mc_, lane, e);
          Value *i = b_.CreateAdd(wrow, b_.CreateAdd(c64(block * kBlock), c.row));
          Value *pair = b_.CreateAlignedLoad(llvm::FixedVectorType::get(et, 2),
                                             lds_a(buf, i, b_.CreateAdd(c64(s * mc_.k), c.col)), llvm::Align(4));
          v = b_.CreateInsertElement(v, b_.CreateExtractElement(pair, uint64_t(0)), uint64_t(e));
          v = b_.CreateInsertElement(v, b_.CreateExtractElement(pair, uint64_t(1)), uint64_t(e + 1));
          ++e;
          continue;
        }
        if (is_a) {
          Coord c = a_element(b_, mc_, lane, e);
          Value *i = b_.CreateAdd(wrow, b_.CreateAdd(c64(block * kBlock), c.row));
          x = b_.CreateLoad(et, lds_a(buf, i, b_.CreateAdd(c64(s * mc_.k), c.col)));
        } else {
          Coord c = b_element(b_, mc_, lane, e);
          Value *j = b_.CreateAdd(wcol, b_.CreateAdd(c64(block * kBlock), c.col));
          x = b_.CreateLoad(et, lds_b(buf, b_.CreateAdd(c64(s * mc_.k), c.row), j));
        }
        v = mc_.elements == 1 ? x : b_.CreateInsertElement(v, x, uint64_t(e));
      }
      return v;
    };
    for (unsigned s = 0; s < ksteps_; ++s) {
      for (unsigned bm = 0; bm < blocks_m_; ++bm)
        store_slot(b_, gather(true, bm, s), state_at(a_slot(bm, s)));
      for (unsigned bn = 0; bn < blocks_n_; ++bn)
        store_slot(b_, gather(false, bn, s), state_at(b_slot(bn, s)));
    }
  }

  /// No matrix instruction: a micro x micro (4 x 4; NVIDIA f32 8 x 8)
  /// register tile per work-item, rows ty + 16 r and columns tx + 16 c of
  /// the macro-tile.
  void scalar_tile(Value *buf) {
    Value *lid = kb_.gemm_local_id();
    Value *ty = b_.CreateUDiv(lid, c64(16)), *tx = b_.CreateURem(lid, c64(16));
    llvm::Type *f32 = b_.getFloatTy();
    unsigned u = micro_;
    std::vector<Value *> acc(u * u);
    for (unsigned s = 0; s < u * u; ++s)
      acc[s] = b_.CreateLoad(f32, state_at(4 * s));
    for (int64_t k = 0; k < depth_; ++k) {
      std::vector<Value *> a(u), bv(u);
      for (unsigned r = 0; r < u; ++r) {
        a[r] = b_.CreateLoad(f32, lds_a(buf, b_.CreateAdd(ty, c64(16 * r)), c64(k)));
        bv[r] = b_.CreateLoad(f32, lds_b(buf, c64(k), b_.CreateAdd(tx, c64(16 * r))));
      }
      for (unsigned s = 0; s < u * u; ++s)
        acc[s] = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {f32}, {a[s / u], bv[s % u], acc[s]});
    }
    for (unsigned s = 0; s < u * u; ++s)
      b_.CreateStore(acc[s], state_at(4 * s));
  }

  KernelStep store() {
    llvm::Function *fn = kb_.gemm_begin_phase();
    Value *batch, *row0, *col0;
    origin(batch, row0, col0);
    Value *m = kb_.gemm_dim(gm_.m), *n = kb_.gemm_dim(gm_.n);
    Value *batch_ok = b_.CreateICmpULT(batch, kb_.gemm_dim(gm_.batch));
    auto put = [&](Value *row, Value *col, Value *acc) {
      Value *ok = b_.CreateAnd(batch_ok, b_.CreateAnd(b_.CreateICmpULT(row, m), b_.CreateICmpULT(col, n)));
      kb_.gemm_if(ok, [&] { gm_.store(batch, row, col, acc); });
    };
    if (mc_) {
      Value *lane, *wrow, *wcol;
      wave_position(lane, wrow, wcol);
      for (unsigned bm = 0; bm < blocks_m_; ++bm)
        for (unsigned bn = 0; bn < blocks_n_; ++bn) {
          Value *d = load_slot(b_, result_type(ctx_, mc_), state_at(c_slot(bm, bn)));
          for (unsigned r = 0; r < mc_.results; ++r) {
            Coord c = d_element(b_, mc_, lane, c64(r));
            Value *row = b_.CreateAdd(row0, b_.CreateAdd(wrow, b_.CreateAdd(c64(bm * kBlock), c.row)));
            Value *col = b_.CreateAdd(col0, b_.CreateAdd(wcol, b_.CreateAdd(c64(bn * kBlock), c.col)));
            put(row, col, b_.CreateExtractElement(d, uint64_t(r)));
          }
        }
    } else {
      Value *lid = kb_.gemm_local_id();
      Value *ty = b_.CreateUDiv(lid, c64(16)), *tx = b_.CreateURem(lid, c64(16));
      for (unsigned s = 0; s < micro_ * micro_; ++s) {
        Value *row = b_.CreateAdd(row0, b_.CreateAdd(ty, c64(16 * (s / micro_))));
        Value *col = b_.CreateAdd(col0, b_.CreateAdd(tx, c64(16 * (s % micro_))));
        put(row, col, b_.CreateLoad(b_.getFloatTy(), state_at(4 * s)));
      }
    }
    return kb_.gemm_end_phase(fn);
  }

  GemmPhaseBuilder &kb_;
  const GemmSpec &gm_;
  MatrixCore mc_;
  llvm::IRBuilder<> &b_;
  llvm::LLVMContext &ctx_;
  DType op_ = DType::f32;
  uint64_t esz_ = 4;
  int64_t vec_ = 4, depth_ = kDepth, buffer_ = 2 * kMacro * kDepth, macro_ = kMacro;
  unsigned micro_ = 4;
  unsigned waves_ = 0, waves_m_ = 0, waves_n_ = 0, blocks_m_ = 0, blocks_n_ = 0, ksteps_ = 0;
  uint64_t acc_bytes_ = 0, frag_bytes_ = 0, a_bytes_ = 0, b_bytes_ = 0;
};

} // namespace

MatrixCore matrix_core_of(int instruction) {
  MatrixCore mc;
  mc.instruction = static_cast<MatrixInstruction>(instruction);
  switch (mc.instruction) {
  case MatrixInstruction::none: break;
  case MatrixInstruction::mfma_f32_16x16x4f32: mc.k = 4, mc.elements = 1, mc.operand = DType::f32; break;
  case MatrixInstruction::mfma_f32_16x16x16f16: mc.k = 16, mc.elements = 4, mc.operand = DType::f16; break;
  case MatrixInstruction::mfma_f32_16x16x16bf16_1k: mc.k = 16, mc.elements = 4, mc.operand = DType::bf16; break;
  case MatrixInstruction::wmma_f32_16x16x16_f16:
    mc.wave = 32, mc.k = 16, mc.elements = 16, mc.results = 8, mc.operand = DType::f16;
    break;
  case MatrixInstruction::wmma_f32_16x16x16_bf16:
    mc.wave = 32, mc.k = 16, mc.elements = 16, mc.results = 8, mc.operand = DType::bf16;
    break;
  case MatrixInstruction::mma_m16n8k16_f16_x2:
    mc.wave = 32, mc.k = 16, mc.elements = 8, mc.results = 8, mc.operand = DType::f16;
    break;
  case MatrixInstruction::mma_m16n8k16_bf16_x2:
    mc.wave = 32, mc.k = 16, mc.elements = 8, mc.results = 8, mc.operand = DType::bf16;
    break;
  }
  return mc;
}

MmaLayoutMutation::MmaLayoutMutation(int kind) { g_mma_mutation.store(kind); }
MmaLayoutMutation::~MmaLayoutMutation() { g_mma_mutation.store(0); }

namespace {
constexpr int64_t kNvidiaMinMacroTiles = 64;
std::atomic<int64_t> g_nvidia_min_macro_tiles{kNvidiaMinMacroTiles}; // NvidiaMacroTileThreshold (tests)
} // namespace

int64_t nvidia_min_macro_tiles() { return g_nvidia_min_macro_tiles.load(); }
NvidiaMacroTileThreshold::NvidiaMacroTileThreshold(int64_t tiles) { g_nvidia_min_macro_tiles.store(tiles); }
NvidiaMacroTileThreshold::~NvidiaMacroTileThreshold() { g_nvidia_min_macro_tiles.store(kNvidiaMinMacroTiles); }

bool nvidia_gemm_fills_macro_tiles(const GemmSpec &gm, const std::string &arch) {
  DimBindings ones;
  for (const Dim *d : {&gm.batch, &gm.m, &gm.n})
    for (const std::string &s : d->symbols())
      ones[s] = 1;
  const int64_t side = 16 * static_cast<int64_t>(scalar_micro_tile_for(arch, gm.dtype));
  auto blocks = [&](const Dim &d) { return (d.evaluate(ones) + side - 1) / side; };
  return gm.batch.evaluate(ones) * blocks(gm.m) * blocks(gm.n) >= nvidia_min_macro_tiles();
}

int nvidia_sm(const std::string &arch) {
  if (!starts_with(arch, "sm_") || arch.size() < 4 || !std::isdigit(static_cast<unsigned char>(arch[3])))
    return 0;
  return std::atoi(arch.c_str() + 3); // sm_90a: 90
}

unsigned scalar_micro_tile_for(const std::string &arch, DType d) { return nvidia_sm(arch) > 0 && d == DType::f32 ? 8 : 4; }

MatrixCore matrix_core_for(const std::string &arch, DType d) {
  using MI = MatrixInstruction;
  bool cdna = arch == "gfx90a" || arch == "gfx940" || arch == "gfx941" || arch == "gfx942";
  // RDNA3's WMMA (gfx12's has another operand layout: not used there).
  bool rdna3 = starts_with(arch, "gfx11") && arch != "gfx11-generic";
  if (cdna && d == DType::f32)
    return matrix_core_of(static_cast<int>(MI::mfma_f32_16x16x4f32));
  if (cdna && d == DType::f16)
    return matrix_core_of(static_cast<int>(MI::mfma_f32_16x16x16f16));
  if (cdna && d == DType::bf16)
    return matrix_core_of(static_cast<int>(MI::mfma_f32_16x16x16bf16_1k));
  if (rdna3 && d == DType::f16)
    return matrix_core_of(static_cast<int>(MI::wmma_f32_16x16x16_f16));
  if (rdna3 && d == DType::bf16)
    return matrix_core_of(static_cast<int>(MI::wmma_f32_16x16x16_bf16));
  // NVIDIA: mma.sync m16n8k16 with f32 accumulators from sm_80 (Ampere).
  if (nvidia_sm(arch) >= 80 && d == DType::f16)
    return matrix_core_of(static_cast<int>(MI::mma_m16n8k16_f16_x2));
  if (nvidia_sm(arch) >= 80 && d == DType::bf16)
    return matrix_core_of(static_cast<int>(MI::mma_m16n8k16_bf16_x2));
  return {};
}

void emit_matrix_core_gemm(GemmPhaseBuilder &kb, const GemmSpec &gm, const MatrixCore &mc, unsigned micro) {
  MatrixCoreGemm(kb, gm, mc, micro).emit();
}

namespace {

/// Two mma.sync m16n8k16 (column halves h = 0, 1 of the 16 x 16 block): A's
/// 8 elements as 4 registers of 2 (f16x2, or bf16x2 in an i32), B's
/// elements 4h..4h+3 as 2 registers, accumulators 4h..4h+3.
Value *mma_sync_x2(llvm::IRBuilder<> &b, const MatrixCore &mc, Value *x, Value *y, Value *c) {
  bool bf16 = mc.operand == DType::bf16;
  llvm::Module *m = b.GetInsertBlock()->getModule();
  llvm::Function *fn = llvm::Intrinsic::getDeclaration(
      m, bf16 ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16 : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32);
  auto pair = [&](Value *v, unsigned first) {
    Value *p = b.CreateShuffleVector(v, {static_cast<int>(first), static_cast<int>(first + 1)});
    return bf16 ? b.CreateBitCast(p, b.getInt32Ty()) : p; // element `first` in the low half
  };
  Value *d = llvm::UndefValue::get(c->getType());
  for (unsigned h = 0; h < 2; ++h) {
    std::vector<Value *> args;
    for (unsigned r = 0; r < 4; ++r)
      args.push_back(pair(x, 2 * r));
    for (unsigned r = 0; r < 2; ++r)
      args.push_back(pair(y, 4 * h + 2 * r));
    for (unsigned r = 0; r < 4; ++r)
      args.push_back(b.CreateExtractElement(c, uint64_t(4 * h + r)));
    Value *out = b.CreateCall(fn, args);
    for (unsigned r = 0; r < 4; ++r)
      d = b.CreateInsertElement(d, b.CreateExtractValue(out, {r}), uint64_t(4 * h + r));
  }
  return d;
}

} // namespace

void emit_device_wave_mma(llvm::IRBuilder<> &b, const WaveMma &op, Value *state) {
  MatrixCore mc = matrix_core_of(op.instruction);
  llvm::LLVMContext &ctx = b.getContext();
  llvm::Type *ot = operand_type(ctx, mc), *rt = result_type(ctx, mc);
  auto at = [&](uint64_t offset) { return b.CreateConstGEP1_64(b.getInt8Ty(), state, offset); };
  Value *x = load_slot(b, ot, at(op.a)), *y = load_slot(b, ot, at(op.b)), *c = load_slot(b, rt, at(op.c));
  Value *d;
  llvm::Module *m = b.GetInsertBlock()->getModule();
  auto mfma = [&](llvm::Intrinsic::ID id) {
    return b.CreateCall(llvm::Intrinsic::getDeclaration(m, id), {x, y, c, b.getInt32(0), b.getInt32(0), b.getInt32(0)});
  };
  switch (mc.instruction) {
  case MatrixInstruction::mfma_f32_16x16x4f32: d = mfma(llvm::Intrinsic::amdgcn_mfma_f32_16x16x4f32); break;
  case MatrixInstruction::mfma_f32_16x16x16f16: d = mfma(llvm::Intrinsic::amdgcn_mfma_f32_16x16x16f16); break;
  case MatrixInstruction::mfma_f32_16x16x16bf16_1k: d = mfma(llvm::Intrinsic::amdgcn_mfma_f32_16x16x16bf16_1k); break;
  case MatrixInstruction::wmma_f32_16x16x16_f16:
    d = b.CreateCall(llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_f16, {rt, ot}), {x, y, c});
    break;
  case MatrixInstruction::wmma_f32_16x16x16_bf16:
    d = b.CreateCall(llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_bf16, {rt, ot}), {x, y, c});
    break;
  case MatrixInstruction::mma_m16n8k16_f16_x2:
  case MatrixInstruction::mma_m16n8k16_bf16_x2: d = mma_sync_x2(b, mc, x, y, c); break;
  default: throw Error(ErrorCode::Internal, "gpu: unknown matrix instruction");
  }
  store_slot(b, d, at(op.c));
}

void emulate_wave_mma(llvm::IRBuilder<> &b, const WaveMma &op, Value *lane_states, uint64_t state_bytes) {
  MatrixCore mc = matrix_core_of(op.instruction);
  llvm::Function *fn = emulation_function(*b.GetInsertBlock()->getModule(), mc);
  b.CreateCall(fn, {lane_states, b.getInt64(static_cast<int64_t>(state_bytes)), b.getInt64(static_cast<int64_t>(op.a)),
                    b.getInt64(static_cast<int64_t>(op.b)), b.getInt64(static_cast<int64_t>(op.c))});
}

} // namespace maxc::codegen
