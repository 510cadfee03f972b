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

/// Resolves and validates a triple and CPU. `triple` empty → the default
/// (x86_64-unknown-linux-gnu); accepted: x86-64 and aarch64 Linux triples
/// ("x86_64-linux-gnu", "aarch64-linux-gnu", ...). `cpu` "native" → the host
/// CPU (only when the triple is the host's architecture), "" → the
/// architecture's generic baseline. Throws maxc::Error (InvalidArgument)
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

/// cpu_vector_lanes of the host ("native"), what the in-process JIT runs on;
/// decided once.
unsigned host_vector_lanes();

/// Initializes the LLVM targets maxc uses (idempotent, thread-safe).
void initialize_llvm_targets();

} // namespace maxc
