// Code generation targets: validating what the user asked for before LLVM
// sees it (LLVM aborts on unknown CPUs), and making TargetMachines.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
}

namespace maxc {

struct CpuTarget {
  std::string triple;   // normalized, e.g. "x86_64-unknown-linux-gnu"
  std::string cpu;      // resolved CPU name ("znver4"; "native" is resolved to the host's)
  std::string features; // "+avx2,+fma,..." for native, else "" (the CPU implies them)
  int opt_level = 2;    // 0..3
};

/// `--cpu portable`, maxc compile's default: a CPU most machines of the
/// architecture have — x86-64-v3 (AVX2, FMA, F16C, BMI2: Haswell, Zen 1
/// and later) on x86-64, the generic (NEON) baseline on aarch64. The
/// artifact's CPU check refuses older CPUs with ERROR_UNSUPPORTED_CPU.
inline constexpr const char *kPortableCpu = "portable";

/// Resolves and validates a triple and CPU. `triple` empty → the default
/// (x86_64-unknown-linux-gnu); accepted: x86-64 and aarch64 Linux triples
/// ("x86_64-linux-gnu", "aarch64-linux-gnu", ...). `cpu` "native" → the host
/// CPU (only when the triple is the host's architecture), "portable" → see
/// kPortableCpu, "" → the architecture's generic baseline. Throws maxc::Error (InvalidArgument)
/// listing the valid names.
CpuTarget resolve_cpu_target(const std::string &triple, const std::string &cpu, int opt_level);

/// CPU names LLVM knows for the triple's architecture, sorted.
std::vector<std::string> known_cpus(const std::string &triple);

/// A TargetMachine for the target (PIC, so objects link into PIE programs
/// and shared libraries alike).
std::unique_ptr<llvm::TargetMachine> make_target_machine(const CpuTarget &target);

/// The f32 lanes of the target's vector registers that the CPU kernels
/// (GEMM panels, attention query blocks, conv planes) are built for: 16 with
/// AVX-512F (512-bit vectors; the generated functions prefer them), 8 with
/// AVX/AVX2, 4 otherwise (SSE, NEON, generic). Decided from the CPU and its
/// features, as the TargetMachine would see them.
unsigned cpu_vector_lanes(const CpuTarget &target);

/// How the CPU's integer GEMM (8-bit A and B, i32 C: Cpu/GemmEmitter.h's
/// emit_gemm_i8) multiplies groups of four byte pairs on the target, at its
/// cpu_vector_lanes i32 lanes: kInt8DotVnni with `vpdpbusd` (AVX512-VNNI at
/// 16 lanes; AVX-VNNI, or AVX512-VNNI with AVX512VL, at 8), kInt8DotAvx2
/// with AVX2's `vpmaddwd` on values widened to i16 (8 lanes); on aarch64
/// kInt8DotUsdot with I8MM's `usdot` (u8 x i8, vpdpbusd's arithmetic), else
/// kInt8DotSdot with the dot-product extension's `sdot` (i8 x i8: the
/// unsigned bytes shifted by -128 and 128 x the signed ones' sums added
/// back, a second `sdot`); else kInt8DotGeneric (portable IR: widened
/// products, summed in groups of four).
inline constexpr unsigned kInt8DotGeneric = 0, kInt8DotAvx2 = 1, kInt8DotVnni = 2, kInt8DotSdot = 3,
                          kInt8DotUsdot = 4;
unsigned cpu_int8_dot(const CpuTarget &target);

/// Whether the target widens a vector of f16 to f32 in one instruction
/// (x86-64: F16C, which x86-64-v3 includes, or AVX-512F; aarch64: always,
/// `fcvtl`). Packed GEMM weights whose every value is an f16 are then kept
/// in f16 (Cpu/GemmPanels.h: PackedWeights::narrow); without it LLVM would
/// convert each element through a library call. (bf16 needs no such
/// instruction: its bits are an f32's upper half.)
bool cpu_converts_f16(const CpuTarget &target);

/// The CPU features beyond the architecture's baseline (SSE2 / NEON) that
/// code for `target` may use and that its artifact checks at run time before
/// the first run (NAME_ERROR_UNSUPPORTED_CPU on a CPU without one; CPUID on
/// x86-64, HWCAP on aarch64), in the check's fixed order: "sse3", ...,
/// "avx2", "fma", ..., "avx512f", .... Empty for the baseline CPUs.
std::vector<std::string> checked_cpu_features(const CpuTarget &target);

/// Of several targets (code variants, maxc compile --cpu A,B), the index of
/// the least demanding: the fewest checked features (the earliest on a
/// tie). Its features are what a CPU needs to run the artifact at all.
size_t least_demanding_target(const std::vector<CpuTarget> &targets);

/// cpu_vector_lanes of the host ("native"), what the in-process JIT runs on;
/// decided once.
unsigned host_vector_lanes();

/// cpu_int8_dot of the host ("native"); decided once.
unsigned host_int8_dot();

/// cpu_converts_f16 of the host ("native"); decided once.
bool host_converts_f16();

/// Initializes the LLVM targets maxc uses (idempotent, thread-safe).
void initialize_llvm_targets();

} // namespace maxc
