// The built-in backends (BackendRegistry.cpp registers them).
#pragma once

#include "maxc/Driver/Backend.h"

namespace maxc::driver {

std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_amdgpu_backend();
std::unique_ptr<Backend> make_amdgpu_emulator_backend();
std::unique_ptr<Backend> make_cuda_backend();

/// The CPU architectures (x86_64, aarch64) with their CPUs: the cpu
/// backend's targets, and the host side of the GPU backends.
std::vector<TargetInfo> cpu_targets();

} // namespace maxc::driver
