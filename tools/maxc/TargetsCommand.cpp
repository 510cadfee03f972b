// maxc targets: what `maxc compile --target/--cpu` accepts, and the GPU
// targets that are planned but not compiled yet (listed under their own
// heading so nobody takes them for working ones).
#include "Commands.h"

#include "maxc/Codegen/Target.h"

#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace maxc::cli {

namespace {

struct CpuArch {
  const char *arch;
  const char *probe_triple; // what known_cpus() is asked
  std::vector<const char *> triples;
  const char *baseline; // the CPU an empty --cpu means
};

const std::vector<CpuArch> &cpu_archs() {
  static const std::vector<CpuArch> archs = {
      {"x86_64", "x86_64-linux-gnu", {"x86_64-linux-gnu", "x86_64-unknown-linux-gnu"}, "x86-64"},
      {"aarch64", "aarch64-linux-gnu", {"aarch64-linux-gnu", "aarch64-unknown-linux-gnu"}, "generic"},
  };
  return archs;
}

struct GpuTarget {
  const char *chip;
  const char *alias;
  const char *product;
};

constexpr const char *kGpuTriple = "amdgcn-amd-amdhsa";
const GpuTarget kGpuTargets[] = {
    {"gfx90a", "mi250x", "AMD Instinct MI250X (CDNA2)"},
    {"gfx942", "mi300x", "AMD Instinct MI300X (CDNA3)"},
    {"gfx1100", "rx7900xtx", "AMD Radeon RX 7900 XTX (RDNA3)"},
};
constexpr const char *kGpuNote = "planned: maxc compile does not generate GPU code yet";

// Words wrapped at `width` columns after `indent`.
std::string wrap(const std::vector<std::string> &words, const std::string &indent, size_t width = 100) {
  std::string out, line = indent;
  for (const std::string &w : words) {
    if (line.size() > indent.size() && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + w;
  }
  return out + line + "\n";
}

} // namespace

int run_targets(const GlobalOptions &, bool json) {
  llvm::Triple host(llvm::sys::getProcessTriple());
  std::string host_cpu = llvm::sys::getHostCPUName().str();
  if (json) {
    nlohmann::ordered_json cpu = nlohmann::ordered_json::array();
    for (const CpuArch &a : cpu_archs()) {
      bool is_host = host.getArchName() == a.arch;
      cpu.push_back({{"arch", a.arch},
                     {"triples", a.triples},
                     {"default", std::string(a.arch) == "x86_64"},
                     {"baseline_cpu", a.baseline},
                     {"native", is_host ? nlohmann::ordered_json(host_cpu) : nlohmann::ordered_json(nullptr)},
                     {"cpus", known_cpus(a.probe_triple)}});
    }
    nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
    for (const GpuTarget &g : kGpuTargets)
      gpus.push_back({{"arch", "amdgcn"},
                      {"triple", kGpuTriple},
                      {"chip", g.chip},
                      {"aliases", {g.alias}},
                      {"product", g.product},
                      {"supported", false}});
    nlohmann::ordered_json out{{"cpu", cpu},
                               {"default_triple", "x86_64-unknown-linux-gnu"},
                               {"host", {{"triple", host.str()}, {"cpu", host_cpu}}},
                               {"gpu", {{"supported", false}, {"note", kGpuNote}, {"targets", gpus}}}};
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << "cpu (maxc compile --target TRIPLE --cpu NAME):\n";
  for (const CpuArch &a : cpu_archs()) {
    bool is_default = std::string(a.arch) == "x86_64";
    std::cout << "  " << a.arch << (is_default ? " (default)" : "") << "\n    triples:";
    for (const char *t : a.triples)
      std::cout << " " << t;
    std::cout << "\n    --cpu native: ";
    if (host.getArchName() == a.arch)
      std::cout << "this host (" << host_cpu << "), the default\n";
    else
      std::cout << "not available (the host is " << host.getArchName().str() << ")\n";
    std::cout << "    --cpu \"\": " << a.baseline << " (the architecture's baseline)\n";
    std::vector<std::string> cpus = known_cpus(a.probe_triple);
    std::cout << "    cpus (" << cpus.size() << "):\n" << wrap(cpus, "      ");
  }
  std::cout << "gpu (not yet supported by maxc compile):\n";
  std::cout << "  " << kGpuNote << "\n";
  for (const GpuTarget &g : kGpuTargets)
    std::cout << "  " << kGpuTriple << "  " << g.chip << std::string(8 - std::string(g.chip).size(), ' ')
              << "alias " << g.alias << std::string(10 - std::string(g.alias).size(), ' ') << g.product << "\n";
  return kSuccess;
}

} // namespace maxc::cli
