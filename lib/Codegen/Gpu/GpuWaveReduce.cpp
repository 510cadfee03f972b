#include "Gpu/GpuWaveReduce.h"

#include "EntryPointUtil.h"
#include "maxc/Codegen/GpuTarget.h"

#include <llvm/IR/IntrinsicsAMDGPU.h>

namespace maxc::codegen {

using llvm::Value;

unsigned amdgpu_wave_size(const std::string &arch) {
  // gfx10, gfx11, gfx12 (and their generic targets) are the wave32 families.
  bool wave32 = arch.size() > 4 && arch.compare(0, 4, "gfx1") == 0 && arch[4] >= '0' && arch[4] <= '9';
  return wave32 ? 32 : 64;
}

std::vector<WaveStep> wave_reduce_steps(unsigned width) {
  using K = WaveStep::Kind;
  std::vector<WaveStep> steps;
  for (unsigned offset = 1; offset < width; offset *= 2)
    switch (offset) {
    case 1: steps.push_back({K::dpp, 1 | 0 << 2 | 3 << 4 | 2 << 6}); break; // quad_perm [1,0,3,2]
    case 2: steps.push_back({K::dpp, 2 | 3 << 2 | 0 << 4 | 1 << 6}); break; // quad_perm [2,3,0,1]
    case 4: steps.push_back({K::dpp, kDppRowHalfMirror}); break;
    case 8: steps.push_back({K::dpp, kDppRowMirror}); break;
    case 16: steps.push_back({K::swizzle, 0x10 << 10 | 0x1f}); break; // bit mode: and 0x1f, or 0, xor 0x10
    default: steps.push_back({K::bpermute, offset}); break;
    }
  return steps;
}

unsigned wave_step_source(const WaveStep &step, unsigned lane, unsigned wave) {
  switch (step.kind) {
  case WaveStep::Kind::dpp:
    if (step.control < 0x100) // quad_perm: lane i of a quad reads selector i
      return (lane & ~3u) | ((step.control >> (2 * (lane & 3))) & 3);
    if (step.control == kDppRowMirror)
      return (lane & ~15u) | (15 - (lane & 15));
    if (step.control == kDppRowHalfMirror)
      return (lane & ~7u) | (7 - (lane & 7));
    return lane; // (no other control is emitted)
  case WaveStep::Kind::swizzle: {
    if (step.control & 0x8000) // QDMode (unused): lane i of a quad reads selector i
      return (lane & ~3u) | ((step.control >> (2 * (lane & 3))) & 3);
    unsigned and_mask = step.control & 0x1f, or_mask = (step.control >> 5) & 0x1f, xor_mask = (step.control >> 10) & 0x1f;
    return (lane & ~31u) | ((((lane & 31) & and_mask) | or_mask) ^ xor_mask);
  }
  case WaveStep::Kind::bpermute: {
    unsigned address = (lane ^ step.control) * 4; // the byte address the kernel passes
    return (address / 4) % wave;
  }
  }
  return lane;
}

namespace {

llvm::Align value_align(llvm::Type *t) { return llvm::Align(std::max<uint64_t>(t->getPrimitiveSizeInBits() / 8, 1)); }

/// `v` (any type of at most 64 bits) as 32-bit words: one, or two (low, high).
std::vector<Value *> to_words(llvm::IRBuilder<> &b, Value *v) {
  llvm::Type *t = v->getType();
  unsigned bits = static_cast<unsigned>(t->getPrimitiveSizeInBits());
  if (!t->isIntegerTy())
    v = b.CreateBitCast(v, b.getIntNTy(bits));
  if (bits <= 32)
    return {b.CreateZExt(v, b.getInt32Ty())};
  return {b.CreateTrunc(v, b.getInt32Ty()), b.CreateTrunc(b.CreateLShr(v, b.getInt64(32)), b.getInt32Ty())};
}

Value *from_words(llvm::IRBuilder<> &b, llvm::Type *t, const std::vector<Value *> &words) {
  unsigned bits = static_cast<unsigned>(t->getPrimitiveSizeInBits());
  Value *v = bits <= 32 ? b.CreateTrunc(words[0], b.getIntNTy(bits))
                        : b.CreateOr(b.CreateZExt(words[0], b.getInt64Ty()),
                                     b.CreateShl(b.CreateZExt(words[1], b.getInt64Ty()), b.getInt64(32)));
  return t->isIntegerTy() ? v : b.CreateBitCast(v, t);
}

} // namespace

void emit_device_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, Value *state) {
  llvm::Type *t = op.combine->getReturnType();
  Value *p = b.CreateConstGEP1_64(b.getInt8Ty(), state, op.offset);
  Value *v = b.CreateAlignedLoad(t, p, value_align(t));
  Value *lane = nullptr; // the hardware lane (mbcnt of all lanes below this one), for ds_bpermute
  for (const WaveStep &step : wave_reduce_steps(op.width)) {
    std::vector<Value *> words = to_words(b, v);
    for (Value *&w : words)
      switch (step.kind) {
      case WaveStep::Kind::dpp: // every source lane is in the run (old: poison, so that
                                // GCNDPPCombine folds the move into the combine's VALU op)
        w = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_update_dpp, {b.getInt32Ty()},
                              {llvm::PoisonValue::get(b.getInt32Ty()), w, b.getInt32(step.control), b.getInt32(0xf),
                               b.getInt32(0xf), b.getTrue()});
        break;
      case WaveStep::Kind::swizzle:
        w = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_swizzle, {}, {w, b.getInt32(step.control)});
        break;
      case WaveStep::Kind::bpermute:
        if (!lane)
          lane = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_mbcnt_hi, {},
                                   {b.getInt32(~0u), b.CreateIntrinsic(llvm::Intrinsic::amdgcn_mbcnt_lo, {},
                                                                       {b.getInt32(~0u), b.getInt32(0)})});
        w = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_bpermute, {},
                              {b.CreateShl(b.CreateXor(lane, b.getInt32(step.control)), b.getInt32(2)), w});
        break;
      }
    v = b.CreateCall(op.combine, {v, from_words(b, t, words)});
  }
  b.CreateAlignedStore(v, p, value_align(t));
}

void emulate_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, Value *lane_states, uint64_t state_bytes,
                         uint64_t lanes) {
  llvm::Type *t = op.combine->getReturnType();
  // The values every lane holds before a step (ds_bpermute reads them all
  // before any lane writes): an array in the function's entry block.
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().getFirstInsertionPt());
  auto *before = entry.CreateAlloca(t, entry.getInt64(op.wave));
  auto slot = [&](Value *lane) {
    return b.CreateGEP(b.getInt8Ty(), lane_states,
                       b.CreateAdd(b.CreateMul(lane, b.getInt64(static_cast<int64_t>(state_bytes))),
                                   b.getInt64(static_cast<int64_t>(op.offset))));
  };
  Value *n = b.getInt64(static_cast<int64_t>(lanes));
  for (const WaveStep &step : wave_reduce_steps(op.width)) {
    emit_counted_loop(b, n, [&](Value *lane) {
      b.CreateStore(b.CreateAlignedLoad(t, slot(lane), value_align(t)), b.CreateGEP(t, before, lane));
    }, "wave.read.");
    // The source lane of every lane, decoded from the step's encoding.
    std::vector<llvm::Constant *> sources;
    for (unsigned l = 0; l < op.wave; ++l)
      sources.push_back(b.getInt64(wave_step_source(step, l, op.wave)));
    auto *table_type = llvm::ArrayType::get(b.getInt64Ty(), op.wave);
    auto *table = new llvm::GlobalVariable(*fn->getParent(), table_type, true, llvm::GlobalValue::PrivateLinkage,
                                           llvm::ConstantArray::get(table_type, sources), "wave.sources");
    emit_counted_loop(b, n, [&](Value *lane) {
      Value *source = b.CreateLoad(b.getInt64Ty(), b.CreateGEP(table_type, table, {b.getInt64(0), lane}));
      // A lane outside the wave's work-items is inactive: its register
      // holds nothing the kernel put there. All-ones bits (a NaN, -1) make
      // a kernel that reads one visibly wrong.
      Value *inside = b.CreateICmpULT(source, n);
      Value *other = b.CreateLoad(t, b.CreateGEP(t, before, b.CreateSelect(inside, source, b.getInt64(0))));
      other = b.CreateSelect(inside, other, from_words(b, t, {b.getInt32(~0u), b.getInt32(~0u)}));
      Value *mine = b.CreateLoad(t, b.CreateGEP(t, before, lane));
      b.CreateAlignedStore(b.CreateCall(op.combine, {mine, other}), slot(lane), value_align(t));
    }, "wave.step.");
  }
}

} // namespace maxc::codegen

namespace maxc {

namespace {
const char *const kKindNames[] = {"dpp", "swizzle", "bpermute"};
}

std::vector<WaveExchange> wave_reduce_exchanges(unsigned width) {
  std::vector<WaveExchange> out;
  for (const codegen::WaveStep &s : codegen::wave_reduce_steps(width))
    out.push_back({kKindNames[static_cast<int>(s.kind)], s.control});
  return out;
}

unsigned wave_exchange_source(const WaveExchange &step, unsigned lane, unsigned wave) {
  codegen::WaveStep s;
  for (int k = 0; k < 3; ++k)
    if (step.kind == kKindNames[k])
      s.kind = static_cast<codegen::WaveStep::Kind>(k);
  s.control = step.control;
  return codegen::wave_step_source(s, lane, wave);
}

} // namespace maxc
