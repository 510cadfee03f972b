// top_k (Ops/TopK.h): the reference's order (largest or smallest first,
// ties by the lower index, NaN above every number), its decomposed form
// (the ranking composition the GPU backends get, chunked past
// kTopKRankLimit elements) and the CPU's kernel (a selection per row in its
// runtime) must all give the same values and indices.
#include "TestUtil.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Ops/TopK.h"
#include "maxc/Transforms/Decompose.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

std::unique_ptr<Graph> top_k_graph(const HostTensor &x, int64_t k, bool largest) {
  return trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) { return ops::top_k(in[0], Dim(k), largest); });
}

/// Values drawn from a few levels: many ties.
HostTensor tied(std::vector<int64_t> shape, int levels = 7) {
  HostTensor t = random_tensor(DType::f32, std::move(shape), 0, levels - 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_f64(i, std::floor(t.get_f64(i)) * 0.5 - 1);
  return t;
}

void check_same(const std::vector<HostTensor> &got, const std::vector<HostTensor> &want, const std::string &what) {
  INFO(what);
  REQUIRE(got.size() == 2);
  CHECK(got[0].identical(want[0]));
  CHECK(got[1].identical(want[1]));
}

} // namespace

TEST_CASE("top_k's reference: order, ties by index, NaN above every number", "[ops][topk]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = HostTensor::from_f64(DType::f32, {1, 7}, {3, 1, nan, 3, -2, nan, 1});
  auto largest = Interpreter::run(*top_k_graph(x, 5, true), {x});
  CHECK(largest[1].to_i64() == std::vector<int64_t>{2, 5, 0, 3, 1});
  CHECK(std::isnan(largest[0].get_f64(0)));
  CHECK(largest[0].get_f64(2) == 3);
  auto smallest = Interpreter::run(*top_k_graph(x, 4, false), {x});
  CHECK(smallest[1].to_i64() == std::vector<int64_t>{4, 1, 6, 0});
  auto none = Interpreter::run(*top_k_graph(x, 0, true), {x});
  CHECK(none[0].numel() == 0);
  CHECK_THROWS_AS(top_k_graph(x, 8, true), Error); // k beyond the row
}

TEST_CASE("top_k decomposed (ranking, chunked) equals the reference", "[ops][topk]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // rank_limit: the chunk size (kTopKRankLimit in decompose()); the small
  // ones chunk short rows (even and uneven chunks, k at a chunk's share), so
  // the chunked path is checked at the reference interpreter's cost of a
  // few thousand comparisons, not kTopKRankLimit squared.
  for (auto [rows, n, k, rank_limit] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 40, 40, kTopKRankLimit},
                                        {2, 33, 5, kTopKRankLimit},
                                        {1, 200, 12, 64},
                                        {2, 130, 20, 64},
                                        {1, 97, 1, 16}}) {
    for (bool largest : {true, false}) {
      HostTensor x = tied({rows, n});
      x.set_f64(3, nan);
      x.set_f64(n / 2, nan);
      auto graph = top_k_graph(x, k, largest);
      std::unique_ptr<Graph> lowered;
      if (rank_limit == kTopKRankLimit) {
        lowered = decompose(*graph);
      } else {
        const Attrs *attrs = nullptr;
        for (const Node &node : graph->nodes())
          if (node.op == kTopKOp)
            attrs = &node.attrs;
        REQUIRE(attrs);
        lowered = trace_graph(types_of({x}), [&](const std::vector<Tensor> &in) {
          return ops::top_k_primitives(in, *attrs, rank_limit);
        });
      }
      for (const Node &node : lowered->nodes())
        REQUIRE(node.op != kTopKOp);
      check_same(Interpreter::run(*lowered, {x}), Interpreter::run(*graph, {x}),
                 "n " + std::to_string(n) + ", k " + std::to_string(k) + ", chunks of " + std::to_string(rank_limit) +
                     (largest ? ", largest" : ", smallest"));
    }
  }
  // Past a chunk's share: refused with the sizes named, not wrong.
  HostTensor x = tied({1, 100});
  auto graph = top_k_graph(x, 40, true);
  for (const Node &node : graph->nodes())
    if (node.op == kTopKOp)
      CHECK_THROWS_AS(trace_graph(types_of({x}),
                                  [&](const std::vector<Tensor> &in) {
                                    return ops::top_k_primitives(in, node.attrs, 32);
                                  }),
                      Error);
}

TEST_CASE("top_k on the CPU (its runtime's selection) and the GPU emulator equals the reference", "[ops][topk][codegen]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{4, 50, 50}, {3, 17, 1}, {1, 5100, 300}, {2, 9, 0}}) {
    for (bool largest : {true, false}) {
      HostTensor x = tied({rows, n});
      if (n > 10) {
        x.set_f64(7, nan);
        x.set_f64(n + 2 < x.numel() ? n + 2 : 1, nan);
      }
      auto graph = top_k_graph(x, k, largest);
      std::string what = "n " + std::to_string(n) + ", k " + std::to_string(k) + (largest ? ", largest" : ", smallest");
      std::vector<HostTensor> want = Interpreter::run(*graph, {x});
      check_same(driver::run_on_host("cpu", *graph, {x}), want, "cpu, " + what);
      if (n < 1000) // the emulator runs the ranking composition, element by element
        check_same(driver::run_on_host("amdgpu-emu", *graph, {x}), want, "amdgpu-emu, " + what);
    }
  }
}
