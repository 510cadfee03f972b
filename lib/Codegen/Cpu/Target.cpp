// Target resolution: everything a user can get wrong about a triple or a CPU
// is checked here, before LLVM sees it (LLVM aborts on an unknown CPU).
#include "OptLevel.h"
#include "Cpu/CpuCheck.h"
#include "maxc/Codegen/Target.h"

#include "maxc/Support/Error.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <mutex>

namespace maxc {

using codegen::codegen_opt_level;

namespace {

constexpr const char *kDefaultTriple = "x86_64-unknown-linux-gnu";
constexpr const char *kAcceptedTriples =
    "x86_64-linux-gnu, x86_64-unknown-linux-gnu, aarch64-linux-gnu, aarch64-unknown-linux-gnu "
    "(x86-64 or aarch64, Linux)";

/// Normalizes and checks the triple; returns the normalized form.
llvm::Triple checked_triple(const std::string &triple) {
  std::string normalized = llvm::Triple::normalize(triple.empty() ? kDefaultTriple : triple);
  llvm::Triple t(normalized);
  bool arch_ok = t.getArch() == llvm::Triple::x86_64 || t.getArch() == llvm::Triple::aarch64;
  if (!arch_ok || !t.isOSLinux())
    throw Error(ErrorCode::InvalidArgument,
                "unsupported target triple '" + triple + "'; accepted: " + kAcceptedTriples);
  return t;
}

const llvm::Target &lookup_target(const llvm::Triple &triple) {
  initialize_llvm_targets();
  std::string message;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple.str(), message);
  if (!target)
    throw Error(ErrorCode::Internal, "LLVM has no target for '" + triple.str() + "': " + message);
  return *target;
}

std::unique_ptr<llvm::MCSubtargetInfo> subtarget_info(const llvm::Triple &triple) {
  const llvm::Target &target = lookup_target(triple);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target.createMCSubtargetInfo(triple.str(), "", ""));
  if (!sti)
    throw Error(ErrorCode::Internal, "LLVM cannot describe the subtargets of '" + triple.str() + "'");
  return sti;
}

std::vector<std::string> cpu_names(const llvm::MCSubtargetInfo &sti) {
  std::vector<std::string> names;
  for (const llvm::SubtargetSubTypeKV &kv : sti.getAllProcessorDescriptions())
    names.emplace_back(kv.Key);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

/// The host's features as "+a,-b,..." sorted by name (StringMap iterates in
/// hash order, which must not leak into outputs).
std::string host_features() {
  std::vector<std::pair<std::string, bool>> features;
  for (const auto &entry : llvm::sys::getHostCPUFeatures())
    features.emplace_back(entry.getKey().str(), entry.getValue());
  std::sort(features.begin(), features.end());
  std::string out;
  for (const auto &[name, enabled] : features) {
    if (!out.empty())
      out += ',';
    out += enabled ? '+' : '-';
    out += name;
  }
  return out;
}

void check_opt_level(int opt_level) {
  if (opt_level < 0 || opt_level > 3)
    throw Error(ErrorCode::InvalidArgument,
                "optimization level " + std::to_string(opt_level) + " is out of range (0..3)");
}

/// Throws InvalidArgument when `cpu` is not a CPU of the triple's target.
void check_cpu(const llvm::Triple &triple, const std::string &cpu) {
  std::unique_ptr<llvm::MCSubtargetInfo> sti = subtarget_info(triple);
  if (sti->isCPUStringValid(cpu))
    return;
  std::vector<std::string> names = cpu_names(*sti);
  std::string message = "unknown CPU '" + cpu + "' for " + triple.str() + ";";
  // Suggest the closest name when it is reasonably close.
  // Only a unique best match is worth suggesting ("znver99" is as close to
  // znver1 as to znver5).
  std::string best;
  unsigned best_distance = ~0u;
  bool unique = false;
  for (const std::string &name : names) {
    unsigned d = llvm::StringRef(name).edit_distance(cpu, /*AllowReplacements=*/true);
    if (d < best_distance) {
      best_distance = d;
      best = name;
      unique = true;
    } else if (d == best_distance) {
      unique = false;
    }
  }
  if (unique && best_distance <= std::max<size_t>(2, cpu.size() / 3))
    message += " did you mean '" + best + "'?";
  message += " valid CPUs: native, portable";
  for (const std::string &name : names)
    message += ", " + name;
  throw Error(ErrorCode::InvalidArgument, message);
}

} // namespace

CpuTarget resolve_cpu_target(const std::string &triple, const std::string &cpu, int opt_level) {
  check_opt_level(opt_level);
  llvm::Triple t = checked_triple(triple);
  CpuTarget out;
  out.triple = t.str();
  out.opt_level = opt_level;
  if (cpu == "native") {
    llvm::Triple host(llvm::sys::getProcessTriple());
    if (host.getArch() != t.getArch())
      throw Error(ErrorCode::InvalidArgument,
                  "--cpu native means the host CPU (" + host.getArchName().str() + "), but the target is " +
                      t.getArchName().str() + "; pass --cpu with a CPU name for " + t.getArchName().str() +
                      " instead (see known CPUs)");
    out.cpu = llvm::sys::getHostCPUName().str();
    out.features = host_features();
  } else if (cpu.empty()) {
    out.cpu = t.getArch() == llvm::Triple::x86_64 ? "x86-64" : "generic";
  } else if (cpu == kPortableCpu) {
    out.cpu = t.getArch() == llvm::Triple::x86_64 ? "x86-64-v3" : "generic";
  } else {
    out.cpu = cpu;
  }
  check_cpu(t, out.cpu);
  return out;
}

std::vector<std::string> known_cpus(const std::string &triple) {
  return cpu_names(*subtarget_info(checked_triple(triple)));
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const CpuTarget &target) {
  // A CpuTarget may be made by hand: validate again, LLVM would abort.
  check_opt_level(target.opt_level);
  llvm::Triple t = checked_triple(target.triple);
  check_cpu(t, target.cpu);
  const llvm::Target &llvm_target = lookup_target(t);
  llvm::TargetOptions options; // no fast-math: kernels set per-instruction flags where they want them
  std::unique_ptr<llvm::TargetMachine> tm(llvm_target.createTargetMachine(
      t.str(), target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
      codegen_opt_level(target.opt_level)));
  if (!tm)
    throw Error(ErrorCode::Internal, "LLVM could not create a target machine for " + t.str() + " (" + target.cpu + ")");
  return tm;
}

namespace {

/// LLVM's description of the target's CPU with its features.
std::unique_ptr<llvm::MCSubtargetInfo> cpu_subtarget(const CpuTarget &target) {
  llvm::Triple t = checked_triple(target.triple);
  check_cpu(t, target.cpu);
  const llvm::Target &llvm_target = lookup_target(t);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      llvm_target.createMCSubtargetInfo(t.str(), target.cpu, target.features));
  if (!sti)
    throw Error(ErrorCode::Internal, "LLVM cannot describe the CPU '" + target.cpu + "' of " + t.str());
  return sti;
}

} // namespace

std::vector<std::string> checked_cpu_features(const CpuTarget &target) {
  std::unique_ptr<llvm::MCSubtargetInfo> sti = cpu_subtarget(target);
  std::vector<std::string> out;
  for (const codegen::CpuFeatureBit &f : codegen::cpu_feature_table(sti->getTargetTriple().getArch() == llvm::Triple::x86_64))
    if (sti->checkFeatures(std::string("+") + f.name))
      out.emplace_back(f.name);
  return out;
}

size_t least_demanding_target(const std::vector<CpuTarget> &targets) {
  size_t best = 0;
  for (size_t v = 1; v < targets.size(); ++v)
    if (checked_cpu_features(targets[v]).size() < checked_cpu_features(targets[best]).size())
      best = v;
  return best;
}

unsigned cpu_vector_lanes(const CpuTarget &target) {
  if (checked_triple(target.triple).getArch() != llvm::Triple::x86_64)
    return 4; // NEON (and the generic baseline): 128-bit vectors
  std::unique_ptr<llvm::MCSubtargetInfo> sti = cpu_subtarget(target);
  if (sti->checkFeatures("+avx512f,+evex512"))
    return 16;
  if (sti->checkFeatures("+avx"))
    return 8;
  return 4;
}

unsigned cpu_int8_dot(const CpuTarget &target) {
  if (checked_triple(target.triple).getArch() == llvm::Triple::aarch64) {
    std::unique_ptr<llvm::MCSubtargetInfo> sti = cpu_subtarget(target);
    return sti->checkFeatures("+i8mm") ? kInt8DotUsdot : sti->checkFeatures("+dotprod") ? kInt8DotSdot : kInt8DotGeneric;
  }
  if (checked_triple(target.triple).getArch() != llvm::Triple::x86_64)
    return kInt8DotGeneric;
  unsigned lanes = cpu_vector_lanes(target);
  std::unique_ptr<llvm::MCSubtargetInfo> sti = cpu_subtarget(target);
  if (lanes == 16 && sti->checkFeatures("+avx512vnni"))
    return kInt8DotVnni;
  if (lanes == 8 && (sti->checkFeatures("+avxvnni") || sti->checkFeatures("+avx512vnni,+avx512vl")))
    return kInt8DotVnni;
  if (lanes == 8 && sti->checkFeatures("+avx2"))
    return kInt8DotAvx2;
  return kInt8DotGeneric;
}

bool cpu_converts_f16(const CpuTarget &target) {
  if (checked_triple(target.triple).getArch() != llvm::Triple::x86_64)
    return true;
  std::unique_ptr<llvm::MCSubtargetInfo> sti = cpu_subtarget(target);
  return sti->checkFeatures("+f16c") || sti->checkFeatures("+avx512f");
}

bool host_converts_f16() {
  static const bool converts = cpu_converts_f16(resolve_cpu_target(llvm::sys::getProcessTriple(), "native", 2));
  return converts;
}

unsigned host_int8_dot() {
  static const unsigned dot = cpu_int8_dot(resolve_cpu_target(llvm::sys::getProcessTriple(), "native", 2));
  return dot;
}

unsigned host_vector_lanes() {
  static const unsigned lanes = cpu_vector_lanes(resolve_cpu_target(llvm::sys::getProcessTriple(), "native", 2));
  return lanes;
}

void initialize_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeX86AsmParser();
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
    LLVMInitializeAArch64AsmParser();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    LLVMInitializeAMDGPUAsmParser();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter(); // NVPTX has no assembly parser
  });
}

} // namespace maxc
