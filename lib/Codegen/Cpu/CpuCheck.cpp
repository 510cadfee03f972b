#include "Cpu/CpuCheck.h"

#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <array>
#include <map>

namespace maxc::codegen {

namespace {

constexpr uint64_t kAvxState = 0x6;     // XCR0: SSE and AVX (YMM) state
constexpr uint64_t kAvx512State = 0xe6; // and the opmask, ZMM_Hi256 and Hi16_ZMM state
constexpr uint32_t kHwcap = 16, kHwcap2 = 26; // getauxval's AT_HWCAP, AT_HWCAP2

enum Reg : uint8_t { eax, ebx, ecx, edx };

// clang-format off
const std::vector<CpuFeatureBit> kX86Features = {
  // name              leaf        sub reg  mask        xcr0
  {"sahf",            0x80000001u, 0, ecx, 1u << 0,  0},
  {"lzcnt",           0x80000001u, 0, ecx, 1u << 5,  0},
  {"prfchw",          0x80000001u, 0, ecx, 1u << 8,  0},
  {"sse3",            1,           0, ecx, 1u << 0,  0},
  {"ssse3",           1,           0, ecx, 1u << 9,  0},
  {"cx16",            1,           0, ecx, 1u << 13, 0},
  {"sse4.1",          1,           0, ecx, 1u << 19, 0},
  {"sse4.2",          1,           0, ecx, 1u << 20, 0},
  {"movbe",           1,           0, ecx, 1u << 22, 0},
  {"popcnt",          1,           0, ecx, 1u << 23, 0},
  {"avx",             1,           0, ecx, 1u << 28, kAvxState},
  {"f16c",            1,           0, ecx, 1u << 29, kAvxState},
  {"fma",             1,           0, ecx, 1u << 12, kAvxState},
  {"bmi",             7,           0, ebx, 1u << 3,  0},
  {"avx2",            7,           0, ebx, 1u << 5,  kAvxState},
  {"bmi2",            7,           0, ebx, 1u << 8,  0},
  {"adx",             7,           0, ebx, 1u << 19, 0},
  {"gfni",            7,           0, ecx, 1u << 8,  0},
  {"avxvnni",         7,           1, eax, 1u << 4,  kAvxState},
  {"avx512f",         7,           0, ebx, 1u << 16, kAvx512State},
  {"avx512dq",        7,           0, ebx, 1u << 17, kAvx512State},
  {"avx512ifma",      7,           0, ebx, 1u << 21, kAvx512State},
  {"avx512cd",        7,           0, ebx, 1u << 28, kAvx512State},
  {"avx512bw",        7,           0, ebx, 1u << 30, kAvx512State},
  {"avx512vl",        7,           0, ebx, 1u << 31, kAvx512State},
  {"avx512vbmi",      7,           0, ecx, 1u << 1,  kAvx512State},
  {"avx512vbmi2",     7,           0, ecx, 1u << 6,  kAvx512State},
  {"avx512vnni",      7,           0, ecx, 1u << 11, kAvx512State},
  {"avx512bitalg",    7,           0, ecx, 1u << 12, kAvx512State},
  {"avx512vpopcntdq", 7,           0, ecx, 1u << 14, kAvx512State},
  {"avx512fp16",      7,           0, edx, 1u << 23, kAvx512State},
  {"avx512bf16",      7,           1, eax, 1u << 5,  kAvx512State},
};

const std::vector<CpuFeatureBit> kAArch64Features = {
  // name       getauxval  mask (Linux's HWCAP_* / HWCAP2_* bits)
  {"crc",       kHwcap,  0, 0, 1u << 7,                0}, // CRC32
  {"lse",       kHwcap,  0, 0, 1u << 8,                0}, // ATOMICS
  {"fullfp16",  kHwcap,  0, 0, (1u << 9) | (1u << 10), 0}, // FPHP, ASIMDHP
  {"rdm",       kHwcap,  0, 0, 1u << 12,               0}, // ASIMDRDM
  {"jsconv",    kHwcap,  0, 0, 1u << 13,               0}, // JSCVT
  {"complxnum", kHwcap,  0, 0, 1u << 14,               0}, // FCMA
  {"rcpc",      kHwcap,  0, 0, 1u << 15,               0}, // LRCPC
  {"dotprod",   kHwcap,  0, 0, 1u << 20,               0}, // ASIMDDP
  {"sve",       kHwcap,  0, 0, 1u << 22,               0}, // SVE
  {"fp16fml",   kHwcap,  0, 0, 1u << 23,               0}, // ASIMDFHM
  {"flagm",     kHwcap,  0, 0, 1u << 27,               0}, // FLAGM
  {"sve2",      kHwcap2, 0, 0, 1u << 1,                0}, // SVE2
  {"fptoint",   kHwcap2, 0, 0, 1u << 8,                0}, // FRINT
  {"i8mm",      kHwcap2, 0, 0, 1u << 13,               0}, // I8MM
  {"bf16",      kHwcap2, 0, 0, 1u << 14,               0}, // BF16
};
// clang-format on

bool is_x86(const CpuTarget &target) { return llvm::Triple(target.triple).getArch() == llvm::Triple::x86_64; }

/// CPUID(leaf, subleaf) as {eax, ebx, ecx, edx}.
std::array<llvm::Value *, 4> cpuid(llvm::IRBuilder<> &b, uint32_t leaf, uint32_t subleaf) {
  llvm::Type *i32 = b.getInt32Ty();
  auto *result = llvm::StructType::get(b.getContext(), {i32, i32, i32, i32});
  auto *type = llvm::FunctionType::get(result, {i32, i32}, false);
  llvm::InlineAsm *asm_ = llvm::InlineAsm::get(type, "cpuid", "={ax},={bx},={cx},={dx},0,2", /*sideeffect=*/false);
  llvm::Value *r = b.CreateCall(type, asm_, {b.getInt32(leaf), b.getInt32(subleaf)}, "cpuid");
  return {b.CreateExtractValue(r, 0), b.CreateExtractValue(r, 1), b.CreateExtractValue(r, 2),
          b.CreateExtractValue(r, 3)};
}

/// The x86 feature bits: bit k set when kX86Features[k] (a checked one) is
/// missing.
llvm::Value *x86_missing(llvm::IRBuilder<> &b, const std::vector<const CpuFeatureBit *> &features) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext &c = b.getContext();
  llvm::Type *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty();
  // The highest standard and extended leaves; a leaf above them reads as zeros.
  llvm::Value *max_leaf = cpuid(b, 0, 0)[eax];
  llvm::Value *max_ext = cpuid(b, 0x80000000u, 0)[eax];
  std::map<std::pair<uint32_t, uint32_t>, std::array<llvm::Value *, 4>> leaves;
  for (const CpuFeatureBit *f : features) {
    auto key = std::make_pair(f->leaf, f->subleaf);
    if (leaves.count(key))
      continue;
    std::array<llvm::Value *, 4> regs = cpuid(b, f->leaf, f->subleaf);
    llvm::Value *present = f->leaf >= 0x80000000u ? b.CreateICmpUGE(max_ext, b.getInt32(f->leaf))
                                                  : b.CreateICmpUGE(max_leaf, b.getInt32(f->leaf));
    if (f->subleaf) { // leaf 7's eax is its highest subleaf
      std::array<llvm::Value *, 4> sub0 = leaves.count({f->leaf, 0}) ? leaves[{f->leaf, 0}] : cpuid(b, f->leaf, 0);
      present = b.CreateAnd(present, b.CreateICmpUGE(sub0[eax], b.getInt32(f->subleaf)));
    }
    for (llvm::Value *&r : regs)
      r = b.CreateSelect(present, r, b.getInt32(0));
    leaves[key] = regs;
  }
  // XCR0 (which register state the OS saves), readable once CPUID.1:ECX
  // says OSXSAVE; XGETBV faults otherwise.
  llvm::Value *xcr0 = nullptr;
  bool need_xcr0 = false;
  for (const CpuFeatureBit *f : features)
    need_xcr0 |= f->xcr0 != 0;
  if (need_xcr0) {
    llvm::Value *osxsave = b.CreateICmpNE(b.CreateAnd(cpuid(b, 1, 0)[ecx], b.getInt32(1u << 27)), b.getInt32(0));
    llvm::BasicBlock *before = b.GetInsertBlock();
    auto *read = llvm::BasicBlock::Create(c, "xgetbv", fn);
    auto *join = llvm::BasicBlock::Create(c, "xcr0", fn);
    b.CreateCondBr(osxsave, read, join);
    b.SetInsertPoint(read);
    auto *type = llvm::FunctionType::get(llvm::StructType::get(c, {i32, i32}), {i32}, false);
    llvm::Value *r = b.CreateCall(type, llvm::InlineAsm::get(type, "xgetbv", "={ax},={dx},{cx}", true), {b.getInt32(0)});
    llvm::Value *value = b.CreateOr(b.CreateZExt(b.CreateExtractValue(r, 0), i64),
                                    b.CreateShl(b.CreateZExt(b.CreateExtractValue(r, 1), i64), 32));
    b.CreateBr(join);
    b.SetInsertPoint(join);
    llvm::PHINode *phi = b.CreatePHI(i64, 2, "xcr0");
    phi->addIncoming(b.getInt64(0), before);
    phi->addIncoming(value, read);
    xcr0 = phi;
  }
  llvm::Value *missing = b.getInt64(0);
  for (size_t k = 0; k < features.size(); ++k) {
    const CpuFeatureBit &f = *features[k];
    llvm::Value *reg = leaves[{f.leaf, f.subleaf}][f.reg];
    llvm::Value *mask = b.getInt32(static_cast<uint32_t>(f.mask));
    llvm::Value *have = b.CreateICmpEQ(b.CreateAnd(reg, mask), mask);
    if (f.xcr0)
      have = b.CreateAnd(have, b.CreateICmpEQ(b.CreateAnd(xcr0, b.getInt64(f.xcr0)), b.getInt64(f.xcr0)));
    missing = b.CreateOr(missing, b.CreateShl(b.CreateZExt(b.CreateNot(have), i64), k));
  }
  return missing;
}

/// The aarch64 feature bits from getauxval(AT_HWCAP) and (AT_HWCAP2).
llvm::Value *aarch64_missing(llvm::IRBuilder<> &b, const std::vector<const CpuFeatureBit *> &features) {
  llvm::Module &module = *b.GetInsertBlock()->getModule();
  llvm::Type *i64 = b.getInt64Ty();
  llvm::FunctionCallee getauxval = module.getOrInsertFunction("getauxval", i64, i64);
  std::map<uint32_t, llvm::Value *> words;
  llvm::Value *missing = b.getInt64(0);
  for (size_t k = 0; k < features.size(); ++k) {
    const CpuFeatureBit &f = *features[k];
    llvm::Value *&word = words[f.leaf];
    if (!word)
      word = b.CreateCall(getauxval, {b.getInt64(f.leaf)}, "hwcap");
    llvm::Value *mask = b.getInt64(static_cast<int64_t>(f.mask));
    llvm::Value *have = b.CreateICmpEQ(b.CreateAnd(word, mask), mask);
    missing = b.CreateOr(missing, b.CreateShl(b.CreateZExt(b.CreateNot(have), i64), k));
  }
  return missing;
}

llvm::Function *new_function(llvm::Module &module, llvm::FunctionType *type, llvm::GlobalValue::LinkageTypes linkage,
                             const std::string &name, const std::string &triple) {
  auto *fn = llvm::Function::Create(type, linkage, name, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  set_baseline_target(*fn, triple);
  return fn;
}

} // namespace

const std::vector<CpuFeatureBit> &cpu_feature_table(bool arch_x86) { return arch_x86 ? kX86Features : kAArch64Features; }

void set_baseline_target(llvm::Function &fn, const std::string &triple) {
  bool x86 = llvm::Triple(triple).getArch() == llvm::Triple::x86_64;
  fn.addFnAttr("target-cpu", x86 ? "x86-64" : "generic");
  fn.addFnAttr("target-features", "");
  fn.addFnAttr("tune-cpu", "generic");
}

CpuCheck emit_cpu_check(llvm::Module &module, const std::string &name, const std::vector<CpuTarget> &targets) {
  if (targets.empty())
    throw Error(ErrorCode::Internal, "emit_cpu_check: no target");
  const CpuTarget &target = targets.front(); // the triple's
  const bool x86 = is_x86(target);
  // The union of the variants' features in table order, and each variant's
  // bits of it.
  std::vector<std::vector<std::string>> wanted;
  for (const CpuTarget &t : targets)
    wanted.push_back(checked_cpu_features(t));
  std::vector<std::string> names;
  std::vector<const CpuFeatureBit *> features;
  for (const CpuFeatureBit &f : cpu_feature_table(x86))
    for (const std::vector<std::string> &w : wanted)
      if (std::find(w.begin(), w.end(), f.name) != w.end()) {
        names.emplace_back(f.name);
        features.push_back(&f);
        break;
      }
  if (names.empty())
    return {};
  if (names.size() > 63)
    throw Error(ErrorCode::Internal, "the CPU check holds 63 features, not " + std::to_string(names.size()));
  std::vector<uint64_t> required(targets.size(), 0);
  for (size_t v = 0; v < targets.size(); ++v)
    for (size_t k = 0; k < names.size(); ++k)
      if (std::find(wanted[v].begin(), wanted[v].end(), names[k]) != wanted[v].end())
        required[v] |= uint64_t{1} << k;
  llvm::LLVMContext &c = module.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type *i64 = b.getInt64Ty(), *i32 = b.getInt32Ty(), *ptr = b.getPtrTy();
  const uint64_t known = uint64_t{1} << 63; // the cache's "computed" bit
  CpuCheck out;

  // i64 NAME.rt.cpu_missing(): the answer cached in a global (computed at
  // most once per thread that races to it; every computation agrees).
  auto *cache = new llvm::GlobalVariable(module, i64, false, llvm::GlobalValue::InternalLinkage, b.getInt64(0),
                                         name + ".rt.cpu_state");
  cache->setAlignment(llvm::Align(8));
  out.missing = new_function(module, llvm::FunctionType::get(i64, false), llvm::GlobalValue::InternalLinkage,
                             name + ".rt.cpu_missing", target.triple);
  out.missing->addFnAttr(llvm::Attribute::NoInline);
  {
    auto *entry = llvm::BasicBlock::Create(c, "entry", out.missing);
    auto *compute = llvm::BasicBlock::Create(c, "compute", out.missing);
    auto *cached = llvm::BasicBlock::Create(c, "cached", out.missing);
    b.SetInsertPoint(entry);
    llvm::LoadInst *state = b.CreateAlignedLoad(i64, cache, llvm::Align(8), "state");
    state->setAtomic(llvm::AtomicOrdering::Monotonic);
    b.CreateCondBr(b.CreateICmpNE(state, b.getInt64(0)), cached, compute);
    b.SetInsertPoint(cached);
    b.CreateRet(b.CreateAnd(state, b.getInt64(static_cast<int64_t>(~known))));
    b.SetInsertPoint(compute);
    llvm::Value *missing = x86 ? x86_missing(b, features) : aarch64_missing(b, features);
    llvm::StoreInst *store =
        b.CreateAlignedStore(b.CreateOr(missing, b.getInt64(static_cast<int64_t>(known))), cache, llvm::Align(8));
    store->setAtomic(llvm::AtomicOrdering::Monotonic);
    b.CreateRet(missing);
  }

  // i32 NAME.rt.cpu_variant(): the supported variants tried from the most
  // demanding down.
  std::vector<size_t> order(targets.size());
  for (size_t v = 0; v < order.size(); ++v)
    order[v] = v;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b_) {
    return __builtin_popcountll(required[a]) > __builtin_popcountll(required[b_]);
  });
  out.variant = new_function(module, llvm::FunctionType::get(i32, false), llvm::GlobalValue::InternalLinkage,
                             name + ".rt.cpu_variant", target.triple);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", out.variant));
    llvm::Value *missing = b.CreateCall(out.missing);
    llvm::Value *chosen = b.getInt32(-1);
    for (auto v = order.rbegin(); v != order.rend(); ++v) // the first in `order` is tested last, wins
      chosen = b.CreateSelect(
          b.CreateICmpEQ(b.CreateAnd(missing, b.getInt64(static_cast<int64_t>(required[*v]))), b.getInt64(0)),
          b.getInt32(static_cast<int32_t>(*v)), chosen);
    b.CreateRet(chosen);
  }
  const size_t least = least_demanding_target(targets);
  std::string cpus;
  for (const CpuTarget &t : targets)
    cpus += (cpus.empty() ? "" : ", ") + t.cpu;

  // i32 NAME_check_cpu()
  out.check = new_function(module, llvm::FunctionType::get(i32, false), llvm::GlobalValue::ExternalLinkage,
                           name + "_check_cpu", target.triple);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", out.check));
  b.CreateRet(b.CreateSelect(b.CreateICmpSGE(b.CreateCall(out.variant), b.getInt32(0)),
                             b.getInt32(static_cast<int32_t>(RunStatus::ok)),
                             b.getInt32(static_cast<int32_t>(RunStatus::unsupported_cpu))));

  // ptr NAME.rt.cpu_message(): "this CPU lacks F1, F2 (model 'NAME' was
  // compiled for CPU)" written into a buffer long enough for every
  // feature (each run writes the same bytes).
  const std::string head = "this CPU lacks ", tail = " (model '" + name + "' was compiled for " + cpus + ")";
  size_t capacity = head.size() + tail.size() + 1;
  for (const std::string &n : names)
    capacity += n.size() + 2;
  auto *buffer_type = llvm::ArrayType::get(b.getInt8Ty(), capacity);
  auto *buffer = new llvm::GlobalVariable(module, buffer_type, false, llvm::GlobalValue::InternalLinkage,
                                          llvm::ConstantAggregateZero::get(buffer_type), name + ".rt.cpu_message");
  out.message = new_function(module, llvm::FunctionType::get(ptr, false), llvm::GlobalValue::InternalLinkage,
                             name + ".rt.cpu_message", target.triple);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", out.message));
    llvm::Value *missing =
        b.CreateAnd(b.CreateCall(out.missing), b.getInt64(static_cast<int64_t>(required[least])));
    llvm::AllocaInst *at = b.CreateAlloca(i64, nullptr, "at"); // bytes written
    b.CreateStore(b.getInt64(0), at);
    auto append = [&](const std::string &text) {
      llvm::Value *offset = b.CreateLoad(i64, at);
      llvm::Value *src = b.CreateGlobalStringPtr(text, name + ".rt.cpu_text", 0, &module);
      b.CreateMemCpy(b.CreateGEP(b.getInt8Ty(), buffer, offset), llvm::MaybeAlign(1), src, llvm::MaybeAlign(1),
                     text.size());
      b.CreateStore(b.CreateAdd(offset, b.getInt64(static_cast<int64_t>(text.size()))), at);
    };
    append(head);
    for (size_t k = 0; k < names.size(); ++k) {
      if (!(required[least] >> k & 1))
        continue;
      llvm::Value *lacks = b.CreateICmpNE(b.CreateAnd(missing, b.getInt64(int64_t{1} << k)), b.getInt64(0));
      auto *yes = llvm::BasicBlock::Create(c, "lacks." + names[k], out.message);
      auto *next = llvm::BasicBlock::Create(c, "next", out.message);
      b.CreateCondBr(lacks, yes, next);
      b.SetInsertPoint(yes);
      append(names[k] + ", ");
      b.CreateBr(next);
      b.SetInsertPoint(next);
    }
    // Drop the last ", ".
    b.CreateStore(b.CreateSub(b.CreateLoad(i64, at), b.getInt64(2)), at);
    append(tail);
    b.CreateStore(b.getInt8(0), b.CreateGEP(b.getInt8Ty(), buffer, b.CreateLoad(i64, at)));
    // Nothing missing (NAME_status_string(9) asked on a CPU that runs the
    // code): the status table's own message.
    const char *message = "";
    for (const StatusInfo &info : status_table())
      if (info.status == RunStatus::unsupported_cpu)
        message = info.message;
    llvm::Value *general = b.CreateGlobalStringPtr(message, name + ".rt.cpu_text", 0, &module);
    b.CreateRet(b.CreateSelect(b.CreateICmpEQ(missing, b.getInt64(0)), general, buffer));
  }
  return out;
}

} // namespace maxc::codegen
