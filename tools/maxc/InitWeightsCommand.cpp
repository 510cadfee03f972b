// maxc init-weights: deterministic random weights for a model, from its
// modules' "params" declarations. Each tensor's values depend only on the
// seed and its qualified name, so adding a layer does not change the others.
#include "Diagnose.h"

#include "maxc/Driver/ArtifactWriter.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Safetensors.h"

#include "maxc/Support/Sha256.h"

#include <cmath>
#include <iostream>

namespace maxc::cli {

namespace {

// splitmix64: tiny, fast, and identical on every platform (unlike
// std::normal_distribution, whose algorithm is implementation-defined).
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
};

HostTensor generate(const ParamSpec &spec, uint64_t seed) {
  HostTensor t(spec.dtype, spec.shape);
  Rng rng{fnv1a64(spec.name) ^ (seed * 0x9e3779b97f4a7c15ull)};
  std::string init = spec.init;
  if (init.empty())
    init = spec.shape.size() >= 2 ? "normal" : "uniform";
  double fan_in = 1;
  for (size_t i = 1; i < spec.shape.size(); ++i)
    fan_in *= static_cast<double>(spec.shape[i]);
  double stddev = init.rfind("normal:", 0) == 0 ? std::strtod(init.c_str() + 7, nullptr) : 1.0 / std::sqrt(std::max(fan_in, 1.0));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = init == "ones" ? 1.0 : init == "zeros" ? 0.0 : init == "uniform" ? rng.uniform() * 0.2 - 0.1 : rng.normal() * stddev;
    if (is_integer(spec.dtype) || is_bool(spec.dtype))
      v = std::floor(v * 4); // small integers
    t.set_f64(i, v);
  }
  return t;
}

} // namespace

int run_init_weights(const GlobalOptions &global, const InitWeightsOptions &options) {
  DiagnosticEngine diagnostics;
  LoadOptions load = load_options(global);
  load.synthesize_weights = true;
  LoadedModel model = load_model(options.model, load, diagnostics);
  if (!model.graph)
    return finish(global, diagnostics);
  std::map<std::string, HostTensor> tensors;
  uint64_t bytes = 0;
  for (const ParamSpec &spec : model.params) {
    tensors.emplace(spec.name, generate(spec, options.seed));
    bytes += tensors.at(spec.name).nbytes();
  }
  try {
    // Never over the model (or anything else it read): ArtifactWriter checks.
    driver::ArtifactWriter writer;
    writer.add_input(options.model);
    for (const std::string &f : model.files_read)
      writer.add_input(f);
    writer.add("weights", options.output,
               serialize_safetensors(tensors, {{"generator", "maxc init-weights"},
                                               {"seed", std::to_string(options.seed)},
                                               {"model", model.graph->name()}}));
    writer.commit();
  } catch (const Error &e) {
    diagnostics.error(e, options.output, "");
  }
  if (!diagnostics.has_errors() && !global.quiet)
    std::cerr << options.output << ": " << tensors.size() << " tensors, " << bytes << " bytes\n";
  return finish(global, diagnostics);
}

} // namespace maxc::cli
