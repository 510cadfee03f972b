// The built-in backends (BackendRegistry.cpp registers them).
#pragma once

#include "maxc/Codegen/Target.h"
#include "maxc/Driver/Backend.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace maxc::driver {

std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_amdgpu_backend();
std::unique_ptr<Backend> make_amdgpu_emulator_backend();
std::unique_ptr<Backend> make_cuda_backend();

/// GPU backends: the artifact kinds of `emit` (obj, header, manifest,
/// graph; then each of `per_arch` asked for, once per arch: "hsaco.gfx90a").
std::vector<std::string> gpu_artifact_kinds(const std::set<std::string> &emit, const std::vector<std::string> &per_arch,
                                            const std::vector<std::string> &arches);
/// Throws maxc::Error (InvalidArgument) for the options no GPU backend
/// supports yet (--weights-mode external).
void reject_gpu_unsupported_options(const BackendOptions &options);

/// The CPU a GPU artifact's host object is compiled for: the architecture's
/// baseline for the default `--cpu portable` (the host code only drives the
/// GPU runtime: it runs on any CPU of the triple, no check needed), else
/// the one CPU named (a list is refused: no code variants on the host).
CpuTarget gpu_host_target(const BackendOptions &options);
/// Runs `check`, rethrowing its maxc::Error located at `flag` ("--gpu").
void at_flag(const char *flag, const std::function<void()> &check);
/// A GPU backend's row of `maxc targets` (alias may be null).
TargetInfo gpu_target_info(const std::string &arch, const std::string &device_triple, const char *alias,
                           const std::string &product);
/// The manifest "target" of a GPU artifact: the host object's CPU target,
/// the device triple and arches, then the fields of `extra_json` (an object).
std::string gpu_target_json(const std::string &kind, const CpuTarget &host, const BackendOptions &options,
                            const std::string &device_triple, const std::vector<std::string> &arches,
                            const std::string &extra_json);

/// The CPU architectures (x86_64, aarch64) with their CPUs: the cpu
/// backend's targets, and the host side of the GPU backends.
std::vector<TargetInfo> cpu_targets();

} // namespace maxc::driver
