// Tensor parallelism (Transforms/Shard.h): every rank's program run on its
// own thread (Support/Communicator.h) must give the whole model's outputs;
// the plan must split what a Megatron-style split would, and gather (never
// compute wrongly) where a split cannot continue.
#include "TestUtil.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Safetensors.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Support/Communicator.h"
#include "maxc/Support/Diagnostics.h"
#include "maxc/Transforms/Shard.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

using namespace maxc;
using namespace maxc::test;

namespace {

/// Every rank's outputs (rank 0's first), each rank's program run by the
/// interpreter on a thread of its own.
std::vector<std::vector<HostTensor>> run_sharded(const Graph &graph, int world, const std::vector<HostTensor> &inputs,
                                                 const DimBindings &dims = {}, ShardReport *report = nullptr) {
  std::vector<std::unique_ptr<Graph>> ranks = shard_graph_ranks(graph, world, report);
  for (const auto &r : ranks)
    r->verify();
  std::vector<std::vector<HostTensor>> per_rank = rank_inputs(graph, ranks, inputs), out(world);
  run_ranks(world, [&](int r) { out[r] = Interpreter::run(*ranks[r], per_rank[r], dims); });
  return out;
}

/// Runs `graph` whole and split among `world` ranks: every rank's outputs
/// must be the whole model's (≤ rtol, the partial sums' order aside) and
/// bit-identical across ranks.
void check_sharded(const Graph &graph, int world, const std::vector<HostTensor> &inputs, const DimBindings &dims = {},
                   ShardReport *report = nullptr, double rtol = 1e-5) {
  std::vector<HostTensor> whole = Interpreter::run(graph, inputs, dims);
  std::vector<std::vector<HostTensor>> ranks = run_sharded(graph, world, inputs, dims, report);
  for (int r = 0; r < world; ++r) {
    REQUIRE(ranks[r].size() == whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      INFO("rank " << r << " of " << world << ", output " << i);
      MAXC_REQUIRE_CLOSE(ranks[r][i], whole[i], rtol, 1e-5);
      CHECK(ranks[r][i].identical(ranks[0][i]));
    }
  }
}

/// An example model with random weights (the examples' own are built by a
/// target the unit tests do not wait for; synthesized ones are zeros and
/// ones, which would hide a wrong split).
LoadedModel load_example(const std::string &name) {
  const std::string path = std::string(MAXC_SOURCE_DIR) + "/examples/" + name + "/model.json";
  DiagnosticEngine diagnostics;
  LoadOptions synth;
  synth.synthesize_weights = true;
  LoadedModel shapes = load_model(path, synth, diagnostics);
  INFO(diagnostics.to_text());
  REQUIRE(shapes.graph);
  std::map<std::string, HostTensor> tensors;
  for (const ParamSpec &p : shapes.params)
    tensors.emplace(p.name, random_tensor(p.dtype, p.shape, -0.2, 0.2));
  std::string weights = (std::filesystem::temp_directory_path() /
                         ("maxc-shard-" + name + "-" + std::to_string(::getpid()) + ".safetensors"))
                            .string();
  write_bytes(weights, serialize_safetensors(tensors, {}));
  LoadOptions options;
  options.weights_path = weights;
  LoadedModel model = load_model(path, options, diagnostics);
  std::filesystem::remove(weights);
  INFO(diagnostics.to_text());
  REQUIRE(model.graph);
  return model;
}

const ShardReport::Weight *weight(const ShardReport &report, const std::string &name) {
  for (const auto &w : report.weights)
    if (w.name == name)
      return &w;
  return nullptr;
}

} // namespace

TEST_CASE("the GPT example split among 2 and 4 ranks gives the whole model's logits", "[transforms][shard]") {
  LoadedModel model = load_example("gpt");
  const Graph *graph = model.graph.get();
  HostTensor tokens = random_tensor(DType::i64, {1, 128}, 0, 1023);
  for (int world : {2, 4}) {
    ShardReport report;
    check_sharded(*graph, world, {tokens}, {}, &report);
    INFO(report.text());
    // Megatron's split: QKV column-parallel piece by piece, the output
    // projections row-parallel, the MLP's up column, down row; the LM head
    // vocabulary-parallel; embeddings and norms replicated.
    const auto *qkv = weight(report, "h.0.attn.qkv.weight");
    REQUIRE(qkv);
    CHECK(qkv->split == "column");
    CHECK(qkv->pieces == 3);
    CHECK(qkv->local == std::vector<int64_t>{768 / world, 256});
    REQUIRE(weight(report, "h.0.attn.proj.weight"));
    CHECK(weight(report, "h.0.attn.proj.weight")->split == "row");
    CHECK(weight(report, "h.3.mlp.fc.weight")->split == "column");
    CHECK(weight(report, "h.3.mlp.proj.weight")->split == "row");
    CHECK(weight(report, "lm_head.weight")->split == "column");
    CHECK(weight(report, "wte.weight")->split == "replicated");
    CHECK(weight(report, "h.0.ln_1.weight")->split == "replicated");
    CHECK(report.all_reduce_runs == 8); // two a layer
    CHECK(report.all_gather_runs == 1); // the logits
    CHECK(report.gathers == std::vector<std::string>{"output logits"});
    CHECK(report.local_weight_bytes() < report.full_weight_bytes() * 3 / 5);
  }
}

TEST_CASE("the sharded GPT keeps one block definition", "[transforms][shard]") {
  LoadedModel model = load_example("gpt");
  auto rank1 = shard_graph(*model.graph, ShardOptions{2, 1});
  REQUIRE(rank1->subgraphs().size() == 1);
  size_t calls = 0;
  for (const Node &n : rank1->nodes())
    calls += n.op == "call";
  CHECK(calls == 4);
}

TEST_CASE("the Llama example split among ranks: grouped k/v heads and the KV cache per rank", "[transforms][shard]") {
  LoadedModel model = load_example("llama");
  const Graph *graph = model.graph.get();
  // A prefill of 7 tokens after 5 cached positions (random cache rows).
  DimBindings dims{{"past", 5}};
  std::vector<HostTensor> inputs;
  for (ValueId id : graph->input_ids()) {
    const TensorType &t = graph->type_of(id);
    if (t.dtype == DType::i64)
      inputs.push_back(random_tensor(DType::i64, {1, 7}, 0, 1023));
    else
      inputs.push_back(random_tensor(DType::f32, {16, t.shape[1].value(), t.shape[2].value()}, -1, 1));
  }
  SECTION("2 ranks: one k/v head each, the caches split by head") {
    ShardReport report;
    check_sharded(*graph, 2, inputs, dims, &report);
    INFO(report.text());
    CHECK(weight(report, "layers.0.attention.wk.weight")->split == "column");
    CHECK(weight(report, "layers.0.attention.wo.weight")->split == "row");
    CHECK(weight(report, "layers.2.feed_forward.w3.weight")->split == "column");
    CHECK(report.inputs.size() == 8); // k_cache_i, v_cache_i: each rank keeps its heads
    CHECK(report.all_reduce_runs == 8);
    CHECK(report.all_gather_runs == 1);
  }
  SECTION("4 ranks: fewer k/v heads than ranks, so k and v are replicated and each rank reads its head") {
    ShardReport report;
    check_sharded(*graph, 4, inputs, dims, &report);
    INFO(report.text());
    CHECK(weight(report, "layers.0.attention.wk.weight")->split == "replicated");
    CHECK(weight(report, "layers.0.attention.wq.weight")->split == "column");
    CHECK(report.inputs.empty());
    CHECK(report.all_gather_runs == 1);
  }
}

TEST_CASE("a split that cannot continue is gathered, or its product kept whole", "[transforms][shard]") {
  HostTensor w1 = random_tensor(DType::f32, {8, 6}, -1, 1), w2 = random_tensor(DType::f32, {6, 8}, -1, 1);
  HostTensor g = random_tensor(DType::f32, {8}, 0.5, 1.5), b = random_tensor(DType::f32, {8}, -1, 1);
  HostTensor x = random_tensor(DType::f32, {3, 6});
  SECTION("a layer norm over the product's columns: the product runs replicated") {
    auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::layer_norm(ops::linear(in[0], Tensor::from_host(w1)), Tensor::from_host(g),
                                                 Tensor::from_host(b))};
    });
    ShardReport report;
    check_sharded(*graph, 2, {x}, {}, &report);
    REQUIRE(!report.weights.empty());
    CHECK(report.weights[0].split == "replicated");
    CHECK(report.all_gather_runs == 0);
    CHECK(report.all_reduce_runs == 0);
  }
  SECTION("ONNX-style x @ W + b, relu, @ W2 + b2: column then row") {
    HostTensor wt = random_tensor(DType::f32, {6, 8}, -1, 1), w2t = random_tensor(DType::f32, {8, 5}, -1, 1);
    HostTensor b2 = random_tensor(DType::f32, {5}, -1, 1);
    auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
      Tensor h = ops::relu(ops::add(ops::matmul(in[0], Tensor::from_host(wt)), Tensor::from_host(b)));
      return std::vector<Tensor>{ops::add(ops::matmul(h, Tensor::from_host(w2t)), Tensor::from_host(b2))};
    });
    ShardReport report;
    check_sharded(*graph, 2, {x}, {}, &report);
    INFO(report.text());
    CHECK(report.all_reduce_runs == 1);
    CHECK(report.all_gather_runs == 0);
    CHECK(report.weights.size() == 4);
    CHECK(report.weights[0].split == "column");
    CHECK(report.weights[2].split == "row");
  }
  SECTION("sizes no rank count divides: everything replicated, no collective") {
    HostTensor w5 = random_tensor(DType::f32, {5, 8}, -1, 1);
    auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::linear(ops::linear(in[0], Tensor::from_host(w1)), Tensor::from_host(w5))};
    });
    ShardReport report;
    check_sharded(*graph, 3, {x}, {}, &report);
    CHECK(report.all_reduce_runs == 0);
    CHECK(report.all_gather_runs == 0);
    for (const auto &w : report.weights)
      CHECK(w.split == "replicated");
  }
}

TEST_CASE("shard_graph refuses a bad rank count or rank", "[transforms][shard]") {
  auto graph = trace_graph({TensorType(DType::f32, {2})}, [](const std::vector<Tensor> &in) { return in; });
  CHECK_THROWS_AS(shard_graph(*graph, ShardOptions{0, 0}), Error);
  CHECK_THROWS_AS(shard_graph(*graph, ShardOptions{2, 2}), Error);
  CHECK_THROWS_AS(shard_graph(*graph, ShardOptions{2, -1}), Error);
  auto one = shard_graph(*graph, ShardOptions{1, 0});
  CHECK(one->nodes().size() == graph->nodes().size());
}

TEST_CASE("a rank's program run alone says it needs its other ranks", "[transforms][shard]") {
  HostTensor w = random_tensor(DType::f32, {4, 4}), x = random_tensor(DType::f32, {2, 4});
  auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::linear(ops::linear(in[0], Tensor::from_host(w)), Tensor::from_host(w))};
  });
  auto rank0 = shard_graph(*graph, ShardOptions{2, 0});
  try {
    Interpreter::run(*rank0, {x});
    FAIL("expected E0303");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::Collective);
    CHECK(std::string(e.what()).find("--tensor-parallel 2") != std::string::npos);
  }
}

TEST_CASE("compiled rank programs (cpu, GPU emulator) give the whole model's outputs; a rank without a communicator fails",
          "[transforms][shard][codegen]") {
  HostTensor w1 = random_tensor(DType::f32, {32, 16}, -0.5, 0.5), w2 = random_tensor(DType::f32, {16, 32}, -0.5, 0.5);
  HostTensor w3 = random_tensor(DType::f32, {24, 16}, -0.5, 0.5), b1 = random_tensor(DType::f32, {32}, -0.5, 0.5);
  HostTensor g = random_tensor(DType::f32, {16}, 0.5, 1.5), x = random_tensor(DType::f32, {2, 5, 16}, -1, 1);
  // An MLP block (column, then row: an all_reduce) and a head split by
  // columns (gathered at the output).
  auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
    Tensor h = ops::gelu(ops::linear(in[0], Tensor::from_host(w1), Tensor::from_host(b1)));
    Tensor y = ops::layer_norm(ops::add(in[0], ops::linear(h, Tensor::from_host(w2))), Tensor::from_host(g), std::nullopt);
    return std::vector<Tensor>{ops::linear(y, Tensor::from_host(w3))};
  });
  std::vector<HostTensor> whole = Interpreter::run(*graph, {x});
  ShardReport report;
  std::vector<std::unique_ptr<Graph>> ranks = shard_graph_ranks(*graph, 2, &report);
  CHECK(report.all_reduce_runs == 1);
  CHECK(report.all_gather_runs == 1);
  std::vector<const Graph *> programs = {ranks[0].get(), ranks[1].get()};
  for (const char *backend : {"cpu", "amdgpu-emu"}) { // the GPU emulator: host code between its launches
    INFO(backend);
    std::vector<HostTensor> out = driver::run_ranks_on_host(backend, programs, rank_inputs(*graph, ranks, {x}), {});
    MAXC_REQUIRE_CLOSE(out.at(0), whole.at(0), 1e-5, 1e-5);
    // Without a communicator: NAME_ERROR_COLLECTIVE, as E0303.
    driver::HostModel alone(backend, *ranks[0]);
    try {
      alone.run({x});
      FAIL("expected E0303");
    } catch (const Error &e) {
      CHECK(e.code() == ErrorCode::Collective);
    }
  }
}

TEST_CASE("shard override PATTERN=replicated keeps matching weights whole, and the products around them", "[transforms][shard]") {
  LoadedModel model = load_example("gpt");
  HostTensor tokens = random_tensor(DType::i64, {1, 128}, 0, 1023);
  std::vector<HostTensor> whole = Interpreter::run(*model.graph, {tokens});
  ShardReport report;
  auto ranks = shard_graph_ranks(*model.graph, 2, &report, {"*mlp.fc*"});
  INFO(report.text());
  CHECK(weight(report, "h.1.mlp.fc.weight")->split == "replicated (--shard)");
  // The MLP's down projection then reads a whole activation: no split is
  // worth a gather after it, so it runs replicated too.
  CHECK(weight(report, "h.1.mlp.proj.weight")->split == "replicated");
  CHECK(weight(report, "h.1.attn.qkv.weight")->split == "column");
  CHECK(report.all_reduce_runs == 4);
  CHECK(report.all_gather_runs == 1);
  std::vector<std::vector<HostTensor>> per_rank = rank_inputs(*model.graph, ranks, {tokens}), out(2);
  run_ranks(2, [&](int r) { out[r] = Interpreter::run(*ranks[r], per_rank[r]); });
  MAXC_REQUIRE_CLOSE(out[0][0], whole[0], 1e-5, 1e-5);
}

TEST_CASE("grouped k/v heads repeated head by head (torch's repeat_interleave) stay split", "[transforms][shard]") {
  // k = x Wk^T as [1, KV, S, hd]; each k/v head split off, unsqueezed,
  // broadcast over its group and reshaped, the parts concatenated: H heads.
  const int64_t S = 6, D = 32, H = 4, KV = 2, hd = 8, g = H / KV;
  HostTensor wq = random_tensor(DType::f32, {H * hd, D}, -0.3, 0.3), wk = random_tensor(DType::f32, {KV * hd, D}, -0.3, 0.3);
  HostTensor wo = random_tensor(DType::f32, {D, H * hd}, -0.3, 0.3), x = random_tensor(DType::f32, {1, S, D}, -1, 1);
  auto heads = [&](const Tensor &t, int64_t n) {
    return ops::transpose(ops::reshape(t, {Dim(1), Dim(S), Dim(n), Dim(hd)}), {0, 2, 1, 3});
  };
  auto graph = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
    Tensor q = heads(ops::linear(in[0], Tensor::from_host(wq)), H);
    Tensor k = heads(ops::linear(in[0], Tensor::from_host(wk)), KV);
    std::vector<Tensor> parts;
    for (const Tensor &p : ops::split(k, std::vector<int64_t>(KV, 1), 1))
      parts.push_back(ops::reshape(ops::broadcast_to(ops::unsqueeze(p, {2}), {Dim(1), Dim(1), Dim(g), Dim(S), Dim(hd)}),
                                   {Dim(1), Dim(g), Dim(S), Dim(hd)}));
    Tensor kk = ops::concat(parts, 1); // [1, H, S, hd]
    Tensor p = ops::softmax(ops::matmul(q, ops::transpose(kk, {0, 1, 3, 2})), -1);
    Tensor o = ops::reshape(ops::transpose(ops::matmul(p, kk), {0, 2, 1, 3}), {Dim(1), Dim(S), Dim(H * hd)});
    return std::vector<Tensor>{ops::linear(o, Tensor::from_host(wo))};
  });
  SECTION("2 ranks: one k/v head each") {
    ShardReport report;
    check_sharded(*graph, 2, {x}, {}, &report);
    INFO(report.text());
    REQUIRE(report.weights.size() == 3); // wq, wk, wo in graph order
    CHECK(report.weights[0].split == "column");
    CHECK(report.weights[1].split == "column");
    CHECK(report.weights[2].split == "row");
    CHECK(report.all_reduce_runs == 1);
    CHECK(report.all_gather_runs == 0);
  }
  SECTION("4 ranks: fewer k/v heads than ranks, k replicated") {
    ShardReport report;
    check_sharded(*graph, 4, {x}, {}, &report);
    INFO(report.text());
    CHECK(report.all_reduce_runs == 1);
    CHECK(report.all_gather_runs == 0);
  }
}
