// What the GPU backends ("amdgpu", "cuda") share in the driver: artifact
// kinds per arch, the options no GPU backend takes yet, and the host-side
// fields of their manifest target.
#include "Backends.h"

#include "maxc/Support/Error.h"

#include <nlohmann/json.hpp>

namespace maxc::driver {

std::vector<std::string> gpu_artifact_kinds(const std::set<std::string> &emit, const std::vector<std::string> &per_arch,
                                            const std::vector<std::string> &arches) {
  std::vector<std::string> out;
  for (const char *k : {"obj", "header", "manifest", "graph"})
    if (emit.count(k))
      out.push_back(k);
  for (const std::string &k : per_arch)
    if (emit.count(k))
      for (const std::string &arch : arches)
        out.push_back(k + "." + arch);
  return out;
}

void reject_gpu_unsupported_options(const BackendOptions &options) {
  if (options.profile)
    throw Error(ErrorCode::InvalidArgument, "--profile is supported for CPU artifacts only", "--profile");
  if (options.external_weights)
    throw Error(ErrorCode::InvalidArgument,
                "--weights-mode external is not supported with --gpu yet (the host object embeds the weights and "
                "NAME_init uploads them)",
                "--weights-mode");
}

CpuTarget gpu_host_target(const BackendOptions &options) {
  if (options.cpu.find(',') != std::string::npos)
    throw Error(ErrorCode::InvalidArgument,
                "--cpu '" + options.cpu + "': a GPU artifact's host code is compiled for one CPU, not a list", "--cpu");
  return resolve_cpu_target(options.triple, options.cpu == kPortableCpu ? "" : options.cpu, options.opt_level);
}

void at_flag(const char *flag, const std::function<void()> &check) {
  try {
    check();
  } catch (const Error &e) {
    throw Error(e.code(), e.message(), flag);
  }
}

TargetInfo gpu_target_info(const std::string &arch, const std::string &device_triple, const char *alias,
                           const std::string &product) {
  TargetInfo t;
  t.arch = arch;
  t.triples = {device_triple};
  if (alias)
    t.aliases = {alias};
  t.product = product;
  return t;
}

std::string gpu_target_json(const std::string &kind, const CpuTarget &host, const BackendOptions &options,
                            const std::string &device_triple, const std::vector<std::string> &arches,
                            const std::string &extra_json) {
  nlohmann::ordered_json target{{"kind", kind},
                                {"triple", host.triple},
                                {"cpu", host.cpu},
                                {"cpu_requested", options.cpu},
                                {"features", host.features},
                                {"opt_level", host.opt_level},
                                {"device_triple", device_triple},
                                {"arches", arches}};
  nlohmann::ordered_json extra = nlohmann::ordered_json::parse(extra_json);
  for (const auto &[key, value] : extra.items())
    target[key] = value;
  return target.dump();
}

} // namespace maxc::driver
