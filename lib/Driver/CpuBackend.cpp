// Backend "cpu": x86-64 and aarch64 Linux objects with the model's C entry
// points (lib/Codegen/Cpu/ModelCompiler.cpp), their header and C harnesses.
#include "Backends.h"

#include "maxc/Codegen/HarnessEmitter.h"
#include "maxc/Codegen/HeaderEmitter.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Support/Error.h"

#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <nlohmann/json.hpp>

namespace maxc::driver {

namespace {

class CpuBackend : public Backend {
public:
  std::string name() const override { return "cpu"; }
  // Softmax and the norms run as one row kernel each (Cpu/NormEmitter),
  // attention as one kernel (Cpu/AttentionEmitter).
  DecomposeOptions decompose_options() const override {
    DecomposeOptions o{true, true};
    o.promote_low_precision = true; // f16/bf16 in f32: the CPU kernels are f32 (PromotePrecision.h)
    o.attention_kv_groups = true;   // grouped-query attention read in place (Cpu/AttentionEmitter)
    o.keep_recurrence = true;       // LSTM/GRU/RNN as one kernel over the sequence (Cpu/RecurrenceEmitter)
    o.keep_matmul_nbits = true;     // weight-only quantized matmuls read in their bits (Cpu/NbitsGemvEmitter)
    o.keep_top_k = true;            // a selection per row in the runtime (Cpu/RuntimePool.c), at any row length
    o.dilated_conv_as_batch = true; // dilated 3x3 convs then take Winograd (Transforms/DilatedConvAsBatch.h)
    return o;
  }
  PlanOptions plan_options() const override { return cpu_plan_options(); }
  std::string description() const override { return "x86-64 and aarch64 Linux objects (maxc compile)"; }

  std::vector<std::string> emit_kinds() const override {
    return {"obj", "header", "asm", "llvm-ir", "test-harness", "bench-harness"};
  }

  std::vector<std::string> artifact_kinds(const std::set<std::string> &emit, const BackendOptions &options) const override {
    std::vector<std::string> out;
    for (const char *k : {"obj", "header", "manifest", "asm", "llvm-ir", "graph", "test-harness", "bench-harness"})
      if (emit.count(k))
        out.push_back(k);
    if (options.external_weights)
      out.push_back("weights");
    return out;
  }

  void validate(const BackendOptions &options) const override {
    if (!options.gpu.empty())
      throw Error(ErrorCode::InvalidArgument, "--gpu selects the amdgpu backend, not cpu", "--gpu");
    if (options.code_object_version != 0)
      throw Error(ErrorCode::InvalidArgument, "--code-object-version applies to --gpu only", "--code-object-version");
    cpu_variants(options);
  }

  std::vector<TargetInfo> targets() const override { return cpu_targets(); }

  /// --cpu A,B,...: one code variant per CPU, each resolved; refused when
  /// two resolve to the same code.
  static std::vector<CpuTarget> cpu_variants(const BackendOptions &options) {
    if (options.cpu.empty()) // the API's "" is the architecture's baseline (Target.h)
      return {resolve_cpu_target(options.triple, "", options.opt_level)};
    std::vector<CpuTarget> out;
    std::vector<std::string> names; // as listed
    size_t start = 0;
    while (true) {
      size_t comma = options.cpu.find(',', start);
      std::string cpu = options.cpu.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (cpu.empty())
        throw Error(ErrorCode::InvalidArgument, "--cpu '" + options.cpu + "' has an empty CPU name in its list", "--cpu");
      CpuTarget t = resolve_cpu_target(options.triple, cpu, options.opt_level);
      for (const CpuTarget &earlier : out)
        if (earlier.cpu == t.cpu && earlier.features == t.features)
          throw Error(ErrorCode::InvalidArgument,
                      "--cpu '" + options.cpu + "' names " + t.cpu + " twice (" + cpu + " resolves to it)", "--cpu");
      out.push_back(std::move(t));
      names.push_back(cpu);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    // The run-time check must tell the variants apart. `native` adds a
    // variant only where this machine has features beyond the others
    // (--cpu portable,native on any machine).
    std::vector<std::vector<std::string>> features;
    for (const CpuTarget &t : out)
      features.push_back(checked_cpu_features(t));
    auto twin = [&](size_t a) { // another variant with a's features
      for (size_t b = 0; b < out.size(); ++b)
        if (b != a && features[b] == features[a])
          return b;
      return out.size();
    };
    for (size_t a = 0; a < out.size(); ++a)
      if (names[a] == "native" && twin(a) < out.size()) {
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(a));
        features.erase(features.begin() + static_cast<std::ptrdiff_t>(a));
        break; // native is listed once (a second would resolve twice, refused above)
      }
    for (size_t a = 0; a < out.size(); ++a)
      if (size_t b = twin(a); b < out.size())
        throw Error(ErrorCode::InvalidArgument,
                    "--cpu '" + options.cpu + "': " + out[a].cpu + " and " + out[b].cpu +
                        " have the same instruction-set features, which the run-time check cannot tell apart; "
                        "list one of them",
                    "--cpu");
    if (out.size() > 8)
      throw Error(ErrorCode::InvalidArgument, "--cpu lists " + std::to_string(out.size()) + " CPUs; at most 8", "--cpu");
    if (out.size() > 1 && options.profile)
      throw Error(ErrorCode::InvalidArgument, "--profile takes one CPU (--cpu lists " + std::to_string(out.size()) + ")",
                  "--cpu");
    return out;
  }

  BackendOutput compile(const PlannedModel &model, const BackendOptions &options, const std::set<std::string> &emit,
                        PassTimer &timer) const override {
    BackendOutput out;
    const std::vector<CpuTarget> variants = cpu_variants(options);
    const CpuTarget &target = variants[least_demanding_target(variants)];
    CpuCodegenRequest request;
    request.object = emit.count("obj") != 0;
    request.assembly = emit.count("asm") != 0;
    request.llvm_ir = emit.count("llvm-ir") != 0;
    request.external_weights = options.external_weights;
    request.jobs = options.jobs;
    request.early = options.early_writes;
    request.profile = options.profile;
    CpuCodegenResult code = compile_cpu_module(*model.lowered, model.abi, variants, request, timer, &model.plans);
    ModelInterface interface = model.interface;
    interface.profile = options.profile;
    std::string cpus;
    for (const CpuTarget &t : variants)
      cpus += (cpus.empty() ? "" : ",") + t.cpu;
    interface.cpu = cpus;
    interface.cpu_features = checked_cpu_features(target); // what every variant's CPU has
    interface.cpu_variants = variants.size();
    if (options.external_weights) {
      interface.external_weights = true;
      interface.weights_blob_bytes = out.weights_blob_bytes = code.weights_blob.size();
      interface.weights_blob_checksum = out.weights_blob_checksum = code.weights_blob_checksum;
    }
    if (request.object)
      out.artifacts.emplace_back("obj", std::move(code.object));
    if (emit.count("header"))
      out.artifacts.emplace_back("header", timer.run("header", [&] { return emit_c_header(interface, model.workspace_bound); }));
    if (request.assembly)
      out.artifacts.emplace_back("asm", std::move(code.assembly));
    if (request.llvm_ir)
      out.artifacts.emplace_back("llvm-ir", std::move(code.llvm_ir));
    if (emit.count("test-harness"))
      out.artifacts.emplace_back("test-harness", timer.run("test-harness", [&] { return emit_test_harness(interface); }));
    if (emit.count("bench-harness"))
      out.artifacts.emplace_back("bench-harness", timer.run("bench-harness", [&] { return emit_bench_harness(interface); }));
    if (options.external_weights)
      out.artifacts.emplace_back("weights", std::move(code.weights_blob));

    const std::string &n = interface.name;
    out.manifest.backend = "cpu";
    nlohmann::ordered_json target_json{{"kind", "cpu"},
                                       {"triple", target.triple},
                                       {"cpu", cpus},
                                       {"cpu_requested", options.cpu},
                                       {"features", target.features},
                                       {"checked_features", interface.cpu_features},
                                       {"opt_level", target.opt_level}};
    if (variants.size() > 1) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (size_t v = 0; v < variants.size(); ++v)
        list.push_back({{"cpu", variants[v].cpu},
                        {"features", variants[v].features},
                        {"checked_features", checked_cpu_features(variants[v])},
                        {"code_bytes", code.variant_code_bytes[v]},
                        {"extra_weights_bytes", code.variant_weights_bytes[v]}});
      target_json["variants"] = list;
    }
    out.manifest.target_json = target_json.dump();
    out.manifest.entry_points = {n + "_run", n + "_run_packed", n + "_workspace_size", n + "_status_string",
                                 n + "_set_parallel_for", n + "_set_num_threads"};
    if (options.external_weights)
      out.manifest.entry_points.push_back(n + "_set_weights");
    out.manifest.entry_points.push_back(n + "_check_cpu");
    out.manifest.entry_points.push_back(n + "_cpu_variant");
    if (interface.state)
      for (const std::string &f : state_entry_point_suffixes())
        out.manifest.entry_points.push_back(n + f);
    if (interface.world > 0)
      out.manifest.entry_points.push_back(n + "_set_communicator");
    if (options.profile) {
      out.manifest.entry_points.push_back(n + "_profile_report");
      out.manifest.entry_points.push_back(n + "_profile_reset");
    }
    out.manifest.link = {"-lm"};
    out.summary = target.triple + ", " + cpus;
    return out;
  }

  std::unique_ptr<llvm::Module> build_host_module(const PlannedModel &model, llvm::LLVMContext &context) const override {
    return build_cpu_module(*model.lowered, model.abi, context, WeightsPlacement::ir, nullptr, &model.plans);
  }
};

} // namespace

std::vector<TargetInfo> cpu_targets() {
  llvm::Triple host(llvm::sys::getProcessTriple());
  std::string host_cpu = llvm::sys::getHostCPUName().str();
  struct Arch {
    const char *arch, *probe, *baseline;
    std::vector<std::string> triples;
  };
  const Arch archs[] = {
      {"x86_64", "x86_64-linux-gnu", "x86-64", {"x86_64-linux-gnu", "x86_64-unknown-linux-gnu"}},
      {"aarch64", "aarch64-linux-gnu", "generic", {"aarch64-linux-gnu", "aarch64-unknown-linux-gnu"}},
  };
  std::vector<TargetInfo> out;
  for (const Arch &a : archs) {
    TargetInfo t;
    t.arch = a.arch;
    t.triples = a.triples;
    t.baseline = a.baseline;
    t.native = host.getArchName() == a.arch ? host_cpu : "";
    t.cpus = known_cpus(a.probe);
    t.is_default = t.arch == "x86_64";
    out.push_back(std::move(t));
  }
  return out;
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

} // namespace maxc::driver
