// maxc targets: what each registered backend compiles for (lib/Driver's
// registry: the same backends `maxc compile` and `maxc run` use).
#include "Commands.h"

#include "maxc/Driver/Backend.h"

#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace maxc::cli {

namespace {

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

std::string padded(const std::string &s, size_t width) {
  return s + std::string(s.size() < width ? width - s.size() : 1, ' ');
}

} // namespace

int run_targets(const GlobalOptions &, bool json) {
  llvm::Triple host(llvm::sys::getProcessTriple());
  std::string host_cpu = llvm::sys::getHostCPUName().str();
  const driver::Backend *cpu = driver::find_backend("cpu");
  const driver::Backend *gpu = driver::find_backend("amdgpu");
  if (json) {
    using ojson = nlohmann::ordered_json;
    auto target_json = [](const driver::TargetInfo &t) {
      ojson out{{"arch", t.arch}, {"triples", t.triples}};
      if (!t.cpus.empty() || !t.baseline.empty()) {
        out["default"] = t.is_default;
        out["baseline_cpu"] = t.baseline;
        out["portable_cpu"] = resolve_cpu_target(t.triples.at(0), kPortableCpu, 2).cpu;
        out["native"] = t.native.empty() ? ojson(nullptr) : ojson(t.native);
        out["cpus"] = t.cpus;
      }
      if (!t.product.empty()) {
        out["aliases"] = t.aliases;
        out["product"] = t.product;
      }
      return out;
    };
    ojson backends = ojson::array();
    for (const auto &b : driver::backends()) {
      ojson targets = ojson::array();
      for (const driver::TargetInfo &t : b->targets())
        targets.push_back(target_json(t));
      backends.push_back({{"name", b->name()}, {"description", b->description()}, {"targets", targets}});
    }
    ojson cpus = ojson::array(), gpus = ojson::array();
    for (const driver::TargetInfo &t : cpu->targets())
      cpus.push_back(target_json(t));
    for (const driver::TargetInfo &t : gpu->targets())
      gpus.push_back({{"arch", "amdgcn"},
                      {"triple", t.triples.empty() ? "" : t.triples[0]},
                      {"chip", t.arch},
                      {"aliases", t.aliases},
                      {"product", t.product},
                      {"supported", true}});
    ojson out{{"backends", backends},
              {"cpu", cpus},
              {"default_triple", "x86_64-unknown-linux-gnu"},
              {"host", {{"triple", host.str()}, {"cpu", host_cpu}}},
              {"gpu", {{"supported", true}, {"backend", "amdgpu"}, {"targets", gpus}}}};
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << "cpu (maxc compile --target TRIPLE --cpu NAME):\n";
  for (const driver::TargetInfo &a : cpu->targets()) {
    std::cout << "  " << a.arch << (a.is_default ? " (default)" : "") << "\n    triples:";
    for (const std::string &t : a.triples)
      std::cout << " " << t;
    std::cout << "\n    --cpu portable: " << resolve_cpu_target(a.triples.at(0), kPortableCpu, 2).cpu
              << ", the default (checked at run time: NAME_ERROR_UNSUPPORTED_CPU on an older CPU)\n";
    std::cout << "    --cpu native: ";
    if (!a.native.empty())
      std::cout << "this host (" << a.native << ")\n";
    else
      std::cout << "not available (the host is " << host.getArchName().str() << ")\n";
    std::cout << "    --cpu \"\": " << a.baseline << " (the architecture's baseline)\n";
    std::cout << "    --cpu A,B,...: one code variant per CPU, picked at run time\n";
    std::cout << "    cpus (" << a.cpus.size() << "):\n" << wrap(a.cpus, "      ");
  }
  std::cout << "amdgpu (maxc compile --gpu ARCH,...: a HIP artifact, link -lamdhip64; any gfx name LLVM knows):\n";
  for (const driver::TargetInfo &g : gpu->targets())
    std::cout << "  " << g.triples[0] << "  " << padded(g.arch, 8) << "alias " << padded(g.aliases[0], 10)
              << g.product << "\n";
  for (const auto &b : driver::backends())
    if (b->name() != "cpu" && b->name() != "amdgpu") {
      std::cout << b->name() << ": " << b->description() << "\n";
      for (const driver::TargetInfo &t : b->targets()) // cuda: sm_80, ...
        std::cout << "  " << (t.triples.empty() ? "" : t.triples[0]) << "  " << padded(t.arch, 8) << t.product << "\n";
    }
  return kSuccess;
}

} // namespace maxc::cli
