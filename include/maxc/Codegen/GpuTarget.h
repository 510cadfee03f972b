// AMD GPU (AMDGPU/HSA) code generation groundwork: validating GPU
// architecture names and code object versions before LLVM sees them (LLVM
// aborts on an unknown processor), and turning an LLVM module of
// amdgpu_kernel functions into a HSACO (a code object loadable by the ROCm
// runtime). Used by the "amdgpu" backend (maxc compile --gpu).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace maxc {

/// The gfx processor names LLVM's AMDGPU target knows ("gfx90a", "gfx942",
/// "gfx1100", "gfx11-generic", ...), sorted and without duplicates.
std::vector<std::string> known_amdgpu_arches();

/// Resolves a comma-separated list of gfx names or product aliases
/// (mi250x, mi250 → gfx90a; mi300x, mi300a → gfx942; rx7900xtx, w7900 →
/// gfx1100; rx6900xt → gfx1030) into gfx names, deduplicated, first
/// occurrence order kept. Spaces around names are ignored. Throws
/// maxc::Error (InvalidArgument) for an empty list or an unknown name,
/// listing the valid architectures and aliases.
std::vector<std::string> resolve_gpu_arches(const std::string &list);

/// The code object version as the "amdhsa_code_object_version" module flag
/// wants it: 4 → 400, 5 → 500, 6 → 600. Throws maxc::Error
/// (InvalidArgument) for anything else.
int resolve_code_object_version(int version);

/// Compiles `module` (its amdgpu_kernel functions) for the gfx architecture
/// `arch` (a name from known_amdgpu_arches(), not an alias) and code object
/// version `code_object_version` (4, 5 or 6) and links the result into a
/// HSACO shared object with ld.lld (`ld.lld-19` on the PATH, else
/// /usr/lib/llvm-19/bin/ld.lld); returns the HSACO's bytes. Works on a
/// clone: `module` is not changed. Its triple must be empty or
/// amdgcn-amd-amdhsa; it is set to amdgcn-amd-amdhsa, the data layout to the
/// target's, and the module is optimized at O2. The same input gives the
/// same bytes. Throws maxc::Error: InvalidArgument for a bad architecture,
/// version or triple, Internal for invalid IR or a failed link (with the
/// linker's message).
std::string emit_amdgpu_code_object(const llvm::Module &module, const std::string &arch,
                                    int code_object_version);

/// The same compile, as AMDGPU assembly (kernel resource comments
/// included: "; NumVgprs:", "; NumSgprs:", "; ScratchSize:").
std::string emit_amdgpu_assembly(const llvm::Module &module, const std::string &arch, int code_object_version);

/// What a kernel uses on one arch, from its code object's metadata.
struct GpuKernelResources {
  std::string name;
  int64_t sgpr_count = -1, vgpr_count = -1; // vgpr_count: VGPRs + AGPRs on gfx90a/gfx94x (one file)
  int64_t agpr_count = -1;                  // accumulation VGPRs (gfx908+; 0 elsewhere)
  int64_t vgpr_spill_count = -1, sgpr_spill_count = -1;
  int64_t private_segment_bytes = -1; // scratch per work-item
  int64_t group_segment_bytes = -1;   // LDS per workgroup
  int64_t wavefront_size = -1;        // 64 or 32
  int64_t max_flat_workgroup_size = -1;
};

/// Waves per SIMD a kernel with `r` reaches on `arch` (the smallest of the
/// arch's wave limit and what its VGPR/AGPR, SGPR and LDS use leave room
/// for), from the register-file and LDS sizes of the arch's generation (as
/// LLVM's AMDGPU occupancy model). 0 when `r` lacks the counts.
int64_t amdgpu_waves_per_simd(const std::string &arch, const GpuKernelResources &r);

/// Register, scratch and LDS use per kernel, read from a HSACO's
/// amdhsa.kernels metadata (the NT_AMDGPU_METADATA note, MessagePack), so
/// nobody has to compile to assembly just to learn them. Empty when the
/// code object has no such note. Throws maxc::Error (Internal) for bytes
/// that are not an ELF object.
std::vector<GpuKernelResources> amdgpu_kernel_resources(const std::string &hsaco);

/// The data layout of amdgcn-amd-amdhsa for `arch` (set on a module before
/// kernels are generated into it, so allocas land in the private address
/// space).
std::string amdgpu_data_layout(const std::string &arch);

/// What a code object built for an AMDGPU target ID ("gfx90a",
/// "gfx90a:xnack+", "gfx11-generic") needs of a device: its processor among
/// `processors` (a generic target lists its family) and every feature of
/// `features` ("xnack+", "sramecc-") set that way on the device.
struct AmdGpuTargetRequirements {
  std::vector<std::string> processors;
  std::vector<std::string> features;
};
/// Throws maxc::Error (InvalidArgument) for a malformed feature.
AmdGpuTargetRequirements amdgpu_target_requirements(const std::string &target);

/// Whether a code object for `target` runs on a device whose gcnArchName is
/// `device_arch` ("gfx90a:sramecc+:xnack-", "gfx1101"): the launcher's
/// fallback when the runtime cannot pick from the offload bundle.
bool amdgpu_target_matches(const std::string &device_arch, const std::string &target);

/// A clang offload bundle ("__CLANG_OFFLOAD_BUNDLE__", the layout clang's
/// HIP toolchain writes: an empty host entry for `host_triple`, then one
/// "hipv4-amdgcn-amd-amdhsa--TARGET" entry per code object, every entry
/// 4096-aligned), which hipModuleLoadData accepts: the runtime picks the
/// object for the device, target features and generic targets included.
std::string make_offload_bundle(const std::vector<std::pair<std::string, std::string>> &code_objects,
                                const std::string &host_triple);
/// "hipv4-amdgcn-amd-amdhsa--" + target.
std::string offload_bundle_id(const std::string &target);
/// The entries of a bundle as (ID, bytes), in order. Throws maxc::Error
/// (InvalidArgument) for bytes that are not one.
std::vector<std::pair<std::string, std::string>> read_offload_bundle(const std::string &bundle);

/// NVIDIA GPUs (a real-GPU check of the same kernel generator where an AMD
/// GPU cannot be had): the data layout of nvptx64-nvidia-cuda, and a module
/// of PTX kernels compiled at O2 to PTX text for `sm` ("sm_90"). Throws
/// maxc::Error (InvalidArgument) for an unknown sm.
std::string nvptx_data_layout(const std::string &sm);
std::string emit_nvptx_assembly(const llvm::Module &module, const std::string &sm);

/// One exchange step of an AMDGPU wave reduction (lib/Codegen/Gpu/
/// GpuWaveReduce.h): `kind` "dpp" (dpp_ctrl), "swizzle" (ds_swizzle
/// offset) or "bpermute" (the xor of the lane whose byte address is passed).
struct WaveExchange {
  std::string kind;
  unsigned control = 0;
};
/// The steps the generator emits to reduce aligned runs of `width` lanes.
std::vector<WaveExchange> wave_reduce_exchanges(unsigned width);
/// The lane whose value `lane` receives in `step` on a wave of `wave`
/// lanes, decoded from the encoding as the hardware reads it (and as the
/// emulator runs it).
unsigned wave_exchange_source(const WaveExchange &step, unsigned lane, unsigned wave);

} // namespace maxc
