// Clang offload bundles and AMDGPU target-ID matching: what lets one host
// object carry a code object per architecture and load the right one on
// ROCm 5, 6 and 7 (GpuModelCompiler.cpp, docs/GPU.md "Loading").
#include "maxc/Codegen/GpuTarget.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace maxc {

namespace {

constexpr const char kBundleMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
constexpr uint64_t kBundleAlignment = 4096; // clang -fgpu-rdc / HIP: -bundle-align=4096

void put_u64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const std::string &in, uint64_t at) {
  if (at + 8 > in.size())
    throw Error(ErrorCode::InvalidArgument, "offload bundle truncated at byte " + std::to_string(at));
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(in[at + static_cast<uint64_t>(i)]);
  return v;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// LLVM 19's generic targets (AMDGPUUsage "Generic Processor Versioning")
// and the processors each one runs on.
const std::map<std::string, std::vector<std::string>> &generic_families() {
  static const std::map<std::string, std::vector<std::string>> families = {
      {"gfx9-generic", {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}},
      {"gfx10-1-generic", {"gfx1010", "gfx1011", "gfx1012", "gfx1013"}},
      {"gfx10-3-generic", {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}},
      {"gfx11-generic", {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152"}},
      {"gfx12-generic", {"gfx1200", "gfx1201"}},
  };
  return families;
}

std::vector<std::string> split(const std::string &text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos)
      return out;
    start = at + 1;
  }
}

} // namespace

AmdGpuTargetRequirements amdgpu_target_requirements(const std::string &target) {
  std::vector<std::string> parts = split(target, ':');
  AmdGpuTargetRequirements r;
  auto generic = generic_families().find(parts[0]);
  r.processors = generic == generic_families().end() ? std::vector<std::string>{parts[0]} : generic->second;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string &f = parts[i];
    if (f.size() < 2 || (f.back() != '+' && f.back() != '-'))
      throw Error(ErrorCode::InvalidArgument,
                  "bad feature '" + f + "' in AMDGPU target '" + target + "' (expected e.g. xnack+ or sramecc-)");
    r.features.push_back(f);
  }
  return r;
}

bool amdgpu_target_matches(const std::string &device_arch, const std::string &target) {
  std::vector<std::string> device = split(device_arch, ':');
  AmdGpuTargetRequirements r = amdgpu_target_requirements(target);
  if (std::find(r.processors.begin(), r.processors.end(), device[0]) == r.processors.end())
    return false;
  // A feature the code object fixes must be set the same way on the device;
  // one it leaves out ("any") matches either setting.
  for (const std::string &f : r.features)
    if (std::find(device.begin() + 1, device.end(), f) == device.end())
      return false;
  return true;
}

std::string offload_bundle_id(const std::string &target) { return "hipv4-amdgcn-amd-amdhsa--" + target; }

std::string make_offload_bundle(const std::vector<std::pair<std::string, std::string>> &code_objects,
                                const std::string &host_triple) {
  // Entries as clang's HIP toolchain writes them: an empty host entry
  // first, then one per code object, each starting at a 4096-byte boundary.
  std::vector<std::pair<std::string, const std::string *>> entries;
  static const std::string empty;
  // An entry ID is KIND-ARCH-VENDOR-OS-ENV-TARGETID: the triple padded to
  // four components, the host's target ID empty.
  std::string host = host_triple;
  for (auto dashes = std::count(host.begin(), host.end(), '-'); dashes < 3; ++dashes)
    host += "-";
  entries.emplace_back("host-" + host + "-", &empty);
  for (const auto &[target, bytes] : code_objects)
    entries.emplace_back(offload_bundle_id(target), &bytes);
  uint64_t header = sizeof(kBundleMagic) - 1 + 8;
  for (const auto &e : entries)
    header += 3 * 8 + e.first.size();
  std::vector<uint64_t> offsets;
  uint64_t at = header;
  for (const auto &e : entries) {
    at = align_up(at, kBundleAlignment);
    offsets.push_back(at);
    at += e.second->size();
  }
  std::string out(kBundleMagic, sizeof(kBundleMagic) - 1);
  put_u64(out, entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    put_u64(out, offsets[i]);
    put_u64(out, entries[i].second->size());
    put_u64(out, entries[i].first.size());
    out += entries[i].first;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    out.resize(offsets[i], '\0');
    out += *entries[i].second;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_offload_bundle(const std::string &bundle) {
  size_t magic = sizeof(kBundleMagic) - 1;
  if (bundle.compare(0, magic, kBundleMagic) != 0)
    throw Error(ErrorCode::InvalidArgument, "not a clang offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)");
  uint64_t count = get_u64(bundle, magic), at = magic + 8;
  std::vector<std::pair<std::string, std::string>> out;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t offset = get_u64(bundle, at), size = get_u64(bundle, at + 8), id = get_u64(bundle, at + 16);
    at += 24;
    if (id > bundle.size() - std::min<uint64_t>(at, bundle.size()) || offset > bundle.size() ||
        size > bundle.size() - offset)
      throw Error(ErrorCode::InvalidArgument, "offload bundle entry " + std::to_string(i) + " is out of range");
    out.emplace_back(bundle.substr(at, id), bundle.substr(offset, size));
    at += id;
  }
  return out;
}

} // namespace maxc
