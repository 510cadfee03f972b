// AMD GPU target: architecture names, code object versions, and module →
// relocatable object → HSACO (linked by an ld.lld subprocess). Everything a
// user can get wrong is checked before LLVM sees it (LLVM aborts on an
// unknown processor). Includes PassBuilder (~10 s to compile): keep this the
// only GPU translation unit that does.
#include "maxc/Codegen/GpuTarget.h"

#include "maxc/Codegen/Target.h"
#include "EntryPointUtil.h"
#include "LldLink.h"
#include "maxc/Support/Error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/BinaryFormat/MsgPackDocument.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <initializer_list>
#include <cctype>
#include <memory>
#include <sstream>
#include <utility>

namespace maxc {

namespace {

constexpr const char *kAmdgpuTriple = "amdgcn-amd-amdhsa";

struct Alias {
  const char *name;
  const char *arch;
};
constexpr Alias kAliases[] = {
    {"mi250x", "gfx90a"},    {"mi250", "gfx90a"}, {"mi300x", "gfx942"},   {"mi300a", "gfx942"},
    {"rx7900xtx", "gfx1100"}, {"w7900", "gfx1100"}, {"rx6900xt", "gfx1030"},
};

const llvm::Target &amdgpu_target() {
  initialize_llvm_targets();
  std::string message;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kAmdgpuTriple, message);
  if (!target)
    throw Error(ErrorCode::Internal, std::string("LLVM has no target for ") + kAmdgpuTriple + ": " + message);
  return *target;
}

constexpr const char *kNvptxTriple = "nvptx64-nvidia-cuda";

/// A target machine for an NVIDIA GPU (sm_80, sm_90, ...), validated first.
std::unique_ptr<llvm::TargetMachine> nvptx_machine(const std::string &sm) {
  initialize_llvm_targets();
  std::string message;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kNvptxTriple, message);
  if (!target)
    throw Error(ErrorCode::Internal, std::string("LLVM has no target for ") + kNvptxTriple + ": " + message);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(kNvptxTriple, "", ""));
  if (!sti || !sti->isCPUStringValid(sm) || sm.rfind("sm_", 0) != 0)
    throw Error(ErrorCode::InvalidArgument, "unknown NVIDIA GPU architecture '" + sm + "' (expected sm_70, sm_80, sm_90, ...)");
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(kNvptxTriple, sm, "", options, std::nullopt,
                                                                      std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!tm)
    throw Error(ErrorCode::Internal, "LLVM could not create a target machine for " + sm);
  return tm;
}

std::string join(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &name : names) {
    if (!out.empty())
      out += ", ";
    out += name;
  }
  return out;
}

std::string aliases_text() {
  std::string out;
  for (const Alias &alias : kAliases) {
    if (!out.empty())
      out += ", ";
    out += std::string(alias.name) + " (" + alias.arch + ")";
  }
  return out;
}

/// Throws InvalidArgument unless `arch` is a gfx name LLVM knows.
void check_arch(const std::string &arch) {
  std::vector<std::string> known = known_amdgpu_arches();
  if (std::binary_search(known.begin(), known.end(), arch))
    return;
  throw Error(ErrorCode::InvalidArgument, "unknown AMD GPU architecture '" + arch +
                                              "'; valid architectures: " + join(known) +
                                              "; aliases (resolve them first): " + aliases_text());
}

std::string trim(const std::string &s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos)
    return {};
  size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

/// The register files and LDS of an arch's generation, as LLVM's AMDGPU
/// occupancy model has them (AMDGPUBaseInfo: getTotalNumVGPRs,
/// getVGPRAllocGranule, getMaxWavesPerEU), for the arch's default wave
/// size (64 on gfx9, 32 on gfx10+); halved for wave64 on gfx10+.
struct ArchModel {
  int64_t vgprs = 256;        // per SIMD lane, wave32 on gfx10+ (VGPRs + AGPRs where unified)
  int64_t vgpr_granule = 4;   // allocation granule, wave32 on gfx10+
  bool separate_agprs = false; // gfx908: AGPRs are a second file of the same size
  int64_t max_waves = 10;     // per SIMD
  int64_t sgprs = 800;        // per SIMD (0: SGPRs never limit, gfx10+)
  int64_t lds_bytes = 65536;  // per CU (gfx9) or WGP (gfx10+, WGP mode)
  int64_t simds = 4;          // sharing that LDS
  bool wave32 = false;
};

ArchModel arch_model(const std::string &arch) {
  ArchModel m;
  auto is = [&](std::initializer_list<const char *> names) {
    return std::any_of(names.begin(), names.end(), [&](const char *n) { return arch == n; });
  };
  if (arch.rfind("gfx9", 0) == 0 && arch.size() <= 6) {
    if (is({"gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx9-4-generic"})) {
      m.vgprs = 512; // one file: VGPRs (aligned to 4) then AGPRs
      m.vgpr_granule = 8;
      m.max_waves = 8;
      if (arch == "gfx950")
        m.lds_bytes = 163840;
    } else if (arch == "gfx908") {
      m.separate_agprs = true;
    }
    return m;
  }
  // gfx10+: wave32, WGP mode (two CUs, four SIMD32s, 128 KiB LDS).
  m.wave32 = true;
  m.sgprs = 0;
  m.lds_bytes = 131072;
  bool gfx103_plus = arch.rfind("gfx101", 0) != 0 && arch != "gfx10-1-generic";
  m.vgprs = 1024;
  m.vgpr_granule = gfx103_plus ? 16 : 8;
  m.max_waves = gfx103_plus ? 16 : 20;
  if (is({"gfx1100", "gfx1101", "gfx1151", "gfx1152"})) {
    m.vgprs = 1536;
    m.vgpr_granule = 24;
  }
  return m;
}

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/// amdgpu-waves-per-eu for a budget of 128 VGPRs per work-item (the
/// manifest's bar): LLVM then keeps every kernel at or under it, spilling
/// instead of growing, so a kernel that needs more shows up as spills.
int64_t waves_for_vgpr_budget(const std::string &arch, int64_t budget) {
  ArchModel m = arch_model(arch);
  return std::clamp<int64_t>(m.vgprs / budget, 1, m.max_waves);
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}


void optimize_o2(llvm::Module &module, llvm::TargetMachine &tm) {
  llvm::PipelineTuningOptions pto;
  pto.LoopUnrolling = true;
  pto.LoopInterleaving = true;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;

  // Destroyed in reverse declaration order: loop analyses first.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;

  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(module, mam);
}

} // namespace

std::vector<std::string> known_amdgpu_arches() {
  static const std::vector<std::string> arches = [] {
    const llvm::Target &target = amdgpu_target();
    std::unique_ptr<llvm::MCSubtargetInfo> sti(target.createMCSubtargetInfo(kAmdgpuTriple, "", ""));
    if (!sti)
      throw Error(ErrorCode::Internal, std::string("LLVM cannot describe the subtargets of ") + kAmdgpuTriple);
    std::vector<std::string> names;
    for (const llvm::SubtargetSubTypeKV &kv : sti->getAllProcessorDescriptions()) {
      llvm::StringRef name(kv.Key);
      if (name.starts_with("gfx"))
        names.push_back(name.str());
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }();
  return arches;
}

std::vector<std::string> resolve_gpu_arches(const std::string &list) {
  std::vector<std::string> known = known_amdgpu_arches();
  std::vector<std::string> out;
  std::stringstream stream(list);
  std::string item;
  bool any = false;
  while (std::getline(stream, item, ',')) {
    std::string name = trim(item);
    if (name.empty())
      continue;
    any = true;
    std::string key = lowercase(name);
    std::string arch;
    for (const Alias &alias : kAliases)
      if (key == alias.name)
        arch = alias.arch;
    if (arch.empty() && std::binary_search(known.begin(), known.end(), key))
      arch = key;
    if (arch.empty())
      throw Error(ErrorCode::InvalidArgument, "unknown AMD GPU architecture '" + name +
                                                  "'; valid architectures: " + join(known) +
                                                  "; aliases: " + aliases_text());
    if (std::find(out.begin(), out.end(), arch) == out.end())
      out.push_back(arch);
  }
  if (!any)
    throw Error(ErrorCode::InvalidArgument, "no AMD GPU architecture given; valid architectures: " + join(known) +
                                                "; aliases: " + aliases_text());
  return out;
}

int resolve_code_object_version(int version) {
  if (version == 4 || version == 5 || version == 6)
    return version * 100;
  throw Error(ErrorCode::InvalidArgument, "unsupported AMD GPU code object version " + std::to_string(version) +
                                              "; valid versions: 4, 5, 6");
}

namespace {

std::string amdgpu_codegen(const llvm::Module &module, const std::string &arch, int code_object_version,
                           llvm::CodeGenFileType file_type) {
  // Validate everything before LLVM sees it: it aborts on bad processors.
  int flag_value = resolve_code_object_version(code_object_version);
  check_arch(arch);
  if (llvm::StringRef(arch).ends_with("-generic") && flag_value < 600)
    throw Error(ErrorCode::InvalidArgument, "the generic AMD GPU architecture '" + arch +
                                                "' needs code object version 6 (got " +
                                                std::to_string(code_object_version) + ")");
  const std::string &current = module.getTargetTriple();
  if (!current.empty() && llvm::Triple::normalize(current) != llvm::Triple::normalize(kAmdgpuTriple))
    throw Error(ErrorCode::InvalidArgument, "module '" + module.getName().str() + "' was built for " + current +
                                                ", not " + kAmdgpuTriple);

  const llvm::Target &target = amdgpu_target();
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target.createTargetMachine(
      kAmdgpuTriple, arch, "", options, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!tm)
    throw Error(ErrorCode::Internal, std::string("LLVM could not create a target machine for ") + kAmdgpuTriple +
                                         " (" + arch + ")");

  // Cloning, like LLVM's passes, may crash on invalid IR: check it first.
  codegen::verify_module(module, "before optimization");
  // Codegen mutates the module: work on a copy.
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(module);
  clone->setTargetTriple(kAmdgpuTriple);
  clone->setDataLayout(tm->createDataLayout());
  clone->setModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", uint32_t(flag_value));
  codegen::verify_module(*clone, "for the AMDGPU target");
  // Occupancy bound: at most 128 VGPRs per kernel unless it asks otherwise.
  std::string waves = std::to_string(waves_for_vgpr_budget(arch, 128));
  for (llvm::Function &f : *clone)
    if (f.getCallingConv() == llvm::CallingConv::AMDGPU_KERNEL && !f.hasFnAttribute("amdgpu-waves-per-eu"))
      f.addFnAttr("amdgpu-waves-per-eu", waves);
  optimize_o2(*clone, *tm);
  codegen::verify_module(*clone, "after optimization");

  llvm::SmallVector<char, 0> buffer;
  {
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, file_type))
      throw Error(ErrorCode::Internal, "LLVM cannot emit code for " + arch);
    pm.run(*clone);
  }
  return std::string(buffer.begin(), buffer.end());
}

} // namespace

std::string emit_amdgpu_code_object(const llvm::Module &module, const std::string &arch,
                                    int code_object_version) {
  return codegen::run_lld({"-shared", "--no-undefined"},
                         {amdgpu_codegen(module, arch, code_object_version, llvm::CodeGenFileType::ObjectFile)},
                         "the " + arch + " code object");
}

std::string emit_amdgpu_assembly(const llvm::Module &module, const std::string &arch, int code_object_version) {
  return amdgpu_codegen(module, arch, code_object_version, llvm::CodeGenFileType::AssemblyFile);
}

std::string amdgpu_data_layout(const std::string &arch) {
  check_arch(arch);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(amdgpu_target().createTargetMachine(
      kAmdgpuTriple, arch, "", options, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!tm)
    throw Error(ErrorCode::Internal, "LLVM could not create a target machine for " + arch);
  return tm->createDataLayout().getStringRepresentation();
}

std::string nvptx_data_layout(const std::string &sm) {
  return nvptx_machine(sm)->createDataLayout().getStringRepresentation();
}

std::string emit_nvptx_assembly(const llvm::Module &module, const std::string &sm) {
  std::unique_ptr<llvm::TargetMachine> tm = nvptx_machine(sm);
  codegen::verify_module(module, "before optimization");
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(module);
  clone->setTargetTriple(kNvptxTriple);
  clone->setDataLayout(tm->createDataLayout());
  optimize_o2(*clone, *tm);
  codegen::verify_module(*clone, "after optimization");
  llvm::SmallVector<char, 0> buffer;
  {
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
      throw Error(ErrorCode::Internal, "LLVM cannot emit PTX for " + sm);
    pm.run(*clone);
  }
  return std::string(buffer.begin(), buffer.end());
}

std::vector<GpuKernelResources> amdgpu_kernel_resources(const std::string &hsaco) {
  auto buffer = llvm::MemoryBufferRef(llvm::StringRef(hsaco.data(), hsaco.size()), "hsaco");
  auto file = llvm::object::ELF64LEObjectFile::create(buffer);
  if (!file)
    throw Error(ErrorCode::Internal, "a code object is not an ELF file: " + llvm::toString(file.takeError()));
  const auto &elf = file->getELFFile();
  auto headers = elf.program_headers();
  if (!headers)
    throw Error(ErrorCode::Internal, "a code object has no program headers: " + llvm::toString(headers.takeError()));
  std::vector<GpuKernelResources> out;
  for (const auto &phdr : *headers) {
    if (phdr.p_type != llvm::ELF::PT_NOTE)
      continue;
    llvm::Error error = llvm::Error::success();
    for (const auto &note : elf.notes(phdr, error)) {
      if (note.getName() != "AMDGPU" || note.getType() != llvm::ELF::NT_AMDGPU_METADATA)
        continue;
      llvm::ArrayRef<uint8_t> desc = note.getDesc(phdr.p_align);
      llvm::msgpack::Document doc;
      if (!doc.readFromBlob(llvm::StringRef(reinterpret_cast<const char *>(desc.data()), desc.size()), false))
        throw Error(ErrorCode::Internal, "a code object's AMDGPU metadata is not MessagePack");
      llvm::msgpack::DocNode &root = doc.getRoot();
      if (!root.isMap())
        continue;
      auto kernels = root.getMap().find(doc.getNode("amdhsa.kernels"));
      if (kernels == root.getMap().end() || !kernels->second.isArray())
        continue;
      for (llvm::msgpack::DocNode &k : kernels->second.getArray()) {
        if (!k.isMap())
          continue;
        GpuKernelResources r;
        auto field = [&](const char *key) -> const llvm::msgpack::DocNode * {
          auto it = k.getMap().find(doc.getNode(key));
          return it == k.getMap().end() ? nullptr : &it->second;
        };
        auto integer = [&](const char *key, int64_t &dst) {
          if (const llvm::msgpack::DocNode *n = field(key)) {
            if (n->getKind() == llvm::msgpack::Type::UInt)
              dst = static_cast<int64_t>(n->getUInt());
            else if (n->getKind() == llvm::msgpack::Type::Int)
              dst = n->getInt();
          }
        };
        if (const llvm::msgpack::DocNode *n = field(".name"); n && n->getKind() == llvm::msgpack::Type::String)
          r.name = n->getString().str();
        integer(".sgpr_count", r.sgpr_count);
        integer(".vgpr_count", r.vgpr_count);
        integer(".agpr_count", r.agpr_count);
        integer(".vgpr_spill_count", r.vgpr_spill_count);
        integer(".sgpr_spill_count", r.sgpr_spill_count);
        integer(".private_segment_fixed_size", r.private_segment_bytes);
        integer(".group_segment_fixed_size", r.group_segment_bytes);
        integer(".wavefront_size", r.wavefront_size);
        integer(".max_flat_workgroup_size", r.max_flat_workgroup_size);
        if (r.agpr_count < 0 && r.vgpr_count >= 0)
          r.agpr_count = 0; // no AGPRs before gfx908 and on gfx10+
        out.push_back(r);
      }
    }
    if (error)
      throw Error(ErrorCode::Internal, "a code object's notes are malformed: " + llvm::toString(std::move(error)));
  }
  return out;
}

int64_t amdgpu_waves_per_simd(const std::string &arch, const GpuKernelResources &r) {
  if (r.vgpr_count < 0 || r.sgpr_count < 0 || r.group_segment_bytes < 0 || r.wavefront_size <= 0)
    return 0;
  ArchModel m = arch_model(arch);
  int64_t vgprs = m.vgprs, granule = m.vgpr_granule;
  if (m.wave32 && r.wavefront_size == 64) {
    vgprs /= 2;
    granule /= 2;
  }
  int64_t waves = std::min(m.max_waves, vgprs / align_up(std::max<int64_t>(r.vgpr_count, 1), granule));
  if (m.separate_agprs && r.agpr_count > 0)
    waves = std::min(waves, vgprs / align_up(r.agpr_count, granule));
  if (m.sgprs > 0)
    waves = std::min(waves, m.sgprs / align_up(std::max<int64_t>(r.sgpr_count, 1), 16));
  if (r.group_segment_bytes > 0) {
    int64_t group = r.max_flat_workgroup_size > 0 ? r.max_flat_workgroup_size : 256;
    int64_t waves_per_group = (group + r.wavefront_size - 1) / r.wavefront_size;
    int64_t groups = m.lds_bytes / r.group_segment_bytes;
    waves = std::min(waves, groups * waves_per_group / m.simds);
  }
  return std::max<int64_t>(waves, 0);
}

} // namespace maxc
