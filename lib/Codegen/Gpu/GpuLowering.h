// The three lowerings of a GPU kernel body (GpuKernelEmitter.h): entry
// points that run a kernel's phases with barriers between them.
//
//  - amdgpu: `amdgpu_kernel void NAME(ptr addrspace(1) buffer..., i64 dim...)`
//    for amdgcn-amd-amdhsa: ids from llvm.amdgcn.workitem/workgroup.id.x,
//    LDS an addrspace(3) global, barriers = workgroup fences + s.barrier.
//  - nvptx: the same signature as a PTX kernel (nvvm.annotations), ids from
//    the nvvm special registers, shared memory in addrspace(3), barrier0.
//  - emulation: `void NAME.emu(ptr buffers, ptr dims, i64 workgroups)` on
//    the host: for each workgroup, for each phase, for each work-item, call
//    the phase with that work-item's state. A barrier holds by construction
//    (a phase finishes for every work-item before the next one starts) and
//    LDS is a host buffer, so the emulator checks the kernels' logic,
//    barriers and LDS use included, on the CPU.
#pragma once

#include "Gpu/GpuKernelEmitter.h"

#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace maxc::codegen {

enum class GpuLoweringTarget { amdgpu, nvptx, emulation };

/// Adds one entry point per kernel of `programs` to `module` (the module
/// the kernel bodies were emitted into). `num_symbols` = dims per launch.
void lower_gpu_kernels(llvm::Module &module, const std::vector<GpuGraphProgram> &programs, GpuLoweringTarget target,
                       size_t num_symbols);

/// The name of a kernel's host-emulation entry point.
std::string emulation_entry_name(const GpuKernel &kernel);

} // namespace maxc::codegen
