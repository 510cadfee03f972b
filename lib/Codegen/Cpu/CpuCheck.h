// The run-time CPU feature check of a CPU artifact: which of the target's
// features the object checks (checked_cpu_features, Target.h), and the IR
// that checks them with CPUID/XGETBV (x86-64) or getauxval's HWCAP words
// (aarch64) before the first run.
//
// The functions that run before the check has passed (the exported entry
// points, the check itself, the runtime's pool) are compiled for the
// architecture's baseline (set_baseline_target), so that a CPU without the
// features gets NAME_ERROR_UNSUPPORTED_CPU instead of SIGILL; LLVM does not
// inline the kernels (compiled for the target's features) into them.
#pragma once

#include "maxc/Codegen/Target.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace maxc::codegen {

/// A CPU feature the check knows how to detect: LLVM's name for it, and
/// where the CPU reports it. x86-64: CPUID leaf/subleaf, register (0 eax,
/// 1 ebx, 2 ecx, 3 edx), the bits all set, and the XCR0 state bits the OS
/// must have enabled (AVX: 0x6, AVX-512: 0xe6). aarch64: `leaf` is the
/// getauxval type (AT_HWCAP 16, AT_HWCAP2 26) and `mask` its bits.
struct CpuFeatureBit {
  const char *name;
  uint32_t leaf, subleaf;
  uint8_t reg;
  uint64_t mask, xcr0;
};

/// The features checked on `arch_x86` (x86-64) or aarch64, in check order
/// (the bits of NAME.rt.cpu_missing): those the code generator may use
/// without an intrinsic asking for them. Baseline features (SSE2, NEON)
/// are not listed.
const std::vector<CpuFeatureBit> &cpu_feature_table(bool arch_x86);

/// The check emitted into `module` for model `name` compiled for
/// `targets` (maxc compile --cpu A,B,...: one code variant per target):
///   i64 NAME.rt.cpu_missing(): a bit per checked feature the CPU lacks
///     (bit k: the k-th of the targets' checked features, in table order),
///     computed once and cached;
///   i32 NAME.rt.cpu_variant(): the variant runs use: of those whose
///     features the CPU has, the one with the most (the earliest on a tie);
///     -1 when none;
///   i32 NAME_check_cpu(): NAME_OK or NAME_ERROR_UNSUPPORTED_CPU;
///   ptr NAME.rt.cpu_message(): "this CPU lacks avx512f, avx512bw (model
///     'NAME' was compiled for CPU)": what the least demanding variant needs
///     and the CPU lacks (for NAME_status_string).
/// Every function is baseline-compiled. Nothing is emitted (all null) when
/// no target has a feature to check (a single baseline CPU).
struct CpuCheck {
  llvm::Function *missing = nullptr, *variant = nullptr, *check = nullptr, *message = nullptr;
};
CpuCheck emit_cpu_check(llvm::Module &module, const std::string &name, const std::vector<CpuTarget> &targets);

/// Compiles `fn` for the triple's baseline CPU (x86-64 / generic aarch64)
/// whatever the TargetMachine's CPU.
void set_baseline_target(llvm::Function &fn, const std::string &triple);

} // namespace maxc::codegen
