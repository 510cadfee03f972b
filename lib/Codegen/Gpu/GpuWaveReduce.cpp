#include "Gpu/GpuWaveReduce.h"

#include "EntryPointUtil.h"

#include <llvm/IR/IntrinsicsAMDGPU.h>

namespace maxc::codegen {

using llvm::Value;

unsigned amdgpu_wave_size(const std::string &arch) {
  // gfx10, gfx11, gfx12 (and their generic targets) are the wave32 families.
  bool wave32 = arch.size() > 4 && arch.compare(0, 4, "gfx1") == 0 && arch[4] >= '0' && arch[4] <= '9';
  return wave32 ? 32 : 64;
}

Value *butterfly_address(llvm::IRBuilder<> &b, Value *lane, unsigned offset) {
  return b.CreateShl(b.CreateXor(lane, b.getInt32(offset)), b.getInt32(2));
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
  // The hardware lane (mbcnt of all lanes below this one): right even were
  // the wave wider than op.wave (partners stay within aligned runs of
  // op.width lanes, which one wave holds whole).
  Value *lane = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_mbcnt_hi, {},
                                  {b.getInt32(~0u), b.CreateIntrinsic(llvm::Intrinsic::amdgcn_mbcnt_lo, {},
                                                                      {b.getInt32(~0u), b.getInt32(0)})});
  for (unsigned offset = op.width / 2; offset >= 1; offset /= 2) {
    Value *addr = butterfly_address(b, lane, offset);
    std::vector<Value *> words = to_words(b, v);
    for (Value *&w : words)
      w = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_bpermute, {}, {addr, w});
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
  for (unsigned offset = op.width / 2; offset >= 1; offset /= 2) {
    emit_counted_loop(b, n, [&](Value *lane) {
      b.CreateStore(b.CreateAlignedLoad(t, slot(lane), value_align(t)), b.CreateGEP(t, before, lane));
    }, "wave.read.");
    emit_counted_loop(b, n, [&](Value *lane) {
      // ds_bpermute_b32: lane l receives the word of lane (addr / 4) mod wave.
      Value *addr = butterfly_address(b, b.CreateTrunc(lane, b.getInt32Ty()), offset);
      Value *source = b.CreateZExt(b.CreateAnd(b.CreateLShr(addr, b.getInt32(2)), b.getInt32(op.wave - 1)),
                                   b.getInt64Ty());
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
