// The GPU backend executed on the host: kernel bodies lowered to the
// emulation target (every work-item of every workgroup, barrier-separated
// phases) and the same host launch sequence as the HIP artifact, with a
// direct call in place of hipModuleLaunchKernel. For `maxc run --device
// amdgpu-emu` and the tests that compare GPU kernels with the interpreter.
#pragma once

#include "maxc/Codegen/GpuModelCompiler.h" // build_gpu_emulation_module
