// Profile builds (maxc/Codegen/Profile.h, maxc profile): every kernel is
// counted once per call, a deduplicated block's kernels once per call site,
// each kernel names the model nodes it computes, and a build without
// profiling carries none of it.
#include "CompiledRunner.h"

#include "maxc/Codegen/Profile.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <algorithm>

using namespace maxc;
using namespace maxc::test;

namespace {

/// x -> 3 calls of one block (matmul + bias, relu) -> x * 2 + 1: the block
/// deduplicated into one subgraph, its nodes named "block.mm" and
/// "block.act", the root's last nodes "head".
std::unique_ptr<Graph> chain_of_blocks(int calls) {
  auto graph = std::make_unique<Graph>("chain", std::vector<TensorType>{TensorType(DType::f32, {5, 8})});
  auto block = [](GraphRealizationContext &ctx, const std::vector<Tensor> &args, const NamedTensors &p) {
    Tensor h;
    {
      NodeNameScope named(ctx, "block.mm");
      h = ops::matmul(args[0], p.at("w")) + p.at("b");
    }
    NodeNameScope named(ctx, "block.act");
    return TensorTree(ops::relu(h));
  };
  GraphRealizationContext ctx(*graph);
  Tensor x = Tensor::from_graph_value(graph->inputs()[0]);
  for (int i = 0; i < calls; ++i) {
    CallOptions options;
    options.instance = "layers." + std::to_string(i);
    options.name = "Block";
    x = ctx.call(options, block, {x},
                 {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}))},
                  {"b", Tensor::from_host(random_tensor(DType::f32, {8}))}})
            .tensor();
  }
  NodeNameScope named(ctx, "head");
  graph->output({(x * 2.0 + 1.0).value()});
  return graph;
}

} // namespace

TEST_CASE("profile: a deduplicated block's kernels count one call per call site and run", "[codegen][profile]") {
  const int calls = 3, runs = 4;
  std::unique_ptr<Graph> graph = chain_of_blocks(calls);
  REQUIRE(graph->subgraphs().size() == 1);
  driver::HostProfile p = driver::profile_on_host(*graph, {random_tensor(DType::f32, {5, 8})}, {}, 1, runs, 1);
  REQUIRE(p.runs == runs);
  REQUIRE(p.kernels.size() == p.counters.size());
  size_t in_block = 0, in_main = 0;
  std::vector<std::string> names;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const ProfiledKernel &kernel = p.kernels[k];
    const KernelCounter &c = p.counters[k];
    INFO("kernel " << k << " " << kernel.label() << " in " << kernel.graph_name);
    CHECK(c.calls == (kernel.graph_name == "main" ? runs : calls * runs));
    CHECK(c.ns >= 0);
    CHECK(c.threads == 1);
    (kernel.graph_name == "main" ? in_main : in_block) += 1;
    names.insert(names.end(), kernel.nodes.begin(), kernel.nodes.end());
  }
  CHECK(in_block >= 1);
  CHECK(in_main >= 1);
  for (const char *name : {"block.mm", "block.act", "head"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
}

TEST_CASE("profile: kernels name the nodes fused into them", "[codegen][profile]") {
  std::unique_ptr<Graph> graph = chain_of_blocks(1);
  driver::HostProfile p = driver::profile_on_host(*graph, {random_tensor(DType::f32, {5, 8})}, {}, 1, 1, 0);
  // The root's x * 2 + 1 is one elementwise kernel: both nodes are "head".
  bool head = false;
  for (const ProfiledKernel &kernel : p.kernels)
    if (kernel.graph_name == "main" && kernel.nodes == std::vector<std::string>{"head"}) {
      head = true;
      CHECK(kernel.ops.size() >= 2); // mul and add in one loop nest
    }
  CHECK(head);
}

TEST_CASE("profile: only a profile build has counters and profile entry points", "[codegen][profile]") {
  std::unique_ptr<Graph> graph = chain_of_blocks(2);
  driver::PlannedModel planned = driver::plan_model(*graph, "chain", DecomposeOptions{true, true}, cpu_plan_options());
  for (bool profile : {false, true}) {
    INFO("profile " << profile);
    llvm::LLVMContext context;
    std::unique_ptr<llvm::Module> module = build_cpu_module(*planned.lowered, planned.abi, context,
                                                            WeightsPlacement::ir, nullptr, &planned.plans, 0, profile);
    CHECK((module->getFunction("chain_profile_report") != nullptr) == profile);
    CHECK((module->getFunction("chain_profile_reset") != nullptr) == profile);
    CHECK((module->getGlobalVariable("chain.profile.counters", true) != nullptr) == profile);
    CHECK((module->getFunction("chain.rt.profile_begin") != nullptr) == profile);
  }
}
