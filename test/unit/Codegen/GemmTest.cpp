// The f32 GEMM kernel (lib/Codegen/Cpu/GemmEmitter.cpp) against the reference
// interpreter at odd sizes: every combination of M, N, K in {1, 5, 17, 33,
// 100, 257} (full and partial 6-row tiles, the GEMV-like M < 6 path, masked
// last column panels, one or two K blocks), with and without an epilogue,
// on one thread and with the column panels on two. The graph has symbolic
// dims, so it is compiled once and run at every size.
//
// Tolerance (rtol 1e-4, atol 1e-4): f32 accumulation over K <= 257 of
// products of values in [-1, 1] vs the reference's double.
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

#include <chrono>
#include <thread>

using namespace maxc;
using namespace maxc::test;

namespace {

/// The graph (inputs A [M, K], B [K, N], C [M, N]) compiled and interpreted
/// on fresh random inputs, on one thread and on two.
void check_mkn(const Graph &graph, JitCompiledGraph &compiled, int64_t M, int64_t N, int64_t K) {
  std::vector<HostTensor> in = {random_tensor(DType::f32, {M, K}, -1, 1), random_tensor(DType::f32, {K, N}, -1, 1),
                                random_tensor(DType::f32, {M, N}, -1, 1)};
  std::vector<HostTensor> expected = Interpreter::run(graph, in);
  for (bool two : {false, true}) {
    std::vector<HostTensor> actual = compiled.run(in, two);
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string mismatch = compare(actual[i], expected[i], 1e-4, 1e-4);
      INFO("M " << M << " N " << N << " K " << K << (two ? ", 2 threads" : ", 1 thread") << ", output " << i << ": "
                << mismatch);
      REQUIRE(mismatch.empty());
    }
  }
}

} // namespace

TEST_CASE("GEMM at odd sizes: tiles, masked edges, small M, K blocks, epilogue, 1 and 2 threads",
          "[codegen][gemm]") {
  Dim m("m"), n("n"), k("k");
  auto graph = trace_graph({TensorType(DType::f32, {m, k}), TensorType(DType::f32, {k, n}), TensorType(DType::f32, {m, n})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]),                     // plain
                                                        ops::relu(ops::matmul(x[0], x[1]) + x[2])}; // epilogue
                           });
  REQUIRE(plan_lowering(*decompose(*graph)).epilogues.size() == 1);
  JitCompiledGraph compiled(*graph);
  const int64_t sizes[] = {1, 5, 17, 33, 100, 257};
  for (int64_t M : sizes)
    for (int64_t N : sizes)
      for (int64_t K : sizes) {
        check_mkn(*graph, compiled, M, N, K);
      }
}

TEST_CASE("GEMM whose last panel is at most one vector wide: 12-row one-vector tiles", "[codegen][gemm]") {
  // N - full panels * NR <= lanes: the last panel runs one vector per row in
  // 12-row tiles, then a 6-row, a 4-row and one-row tiles (M = 12..47 and
  // row blocks of up to 48), also with B packed per K block (K > 256) and
  // an epilogue; at 16 lanes (AVX-512) N = 16 and 48 are narrow, N = 17
  // and 40 not; at 8 lanes N = 16 and 48 are full panels, N = 20 narrow.
  Dim m("m"), n("n"), k("k");
  auto graph = trace_graph({TensorType(DType::f32, {m, k}), TensorType(DType::f32, {k, n}), TensorType(DType::f32, {m, n})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]),
                                                        ops::relu(ops::matmul(x[0], x[1]) + x[2])};
                           });
  JitCompiledGraph compiled(*graph);
  for (int64_t M : {12, 18, 30, 47, 61, 130})
    for (int64_t N : {3, 16, 17, 20, 40, 48})
      for (int64_t K : {7, 300}) {
        check_mkn(*graph, compiled, M, N, K);
      }
}

TEST_CASE("GEMM with K = 0 writes zeros and runs the epilogue", "[codegen][gemm]") {
  auto graph = trace_graph({TensorType(DType::f32, {Dim("m"), Dim("k")}), TensorType(DType::f32, {Dim("k"), 40}),
                            TensorType(DType::f32, {40})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]), ops::matmul(x[0], x[1]) + x[2]};
                           });
  JitCompiledGraph compiled(*graph);
  for (int64_t M : {1, 7}) {
    std::vector<HostTensor> in = {HostTensor(DType::f32, {M, 0}), HostTensor(DType::f32, {0, 40}),
                                  random_tensor(DType::f32, {40})};
    std::vector<HostTensor> expected = Interpreter::run(*graph, in);
    for (bool two : {false, true}) {
      std::vector<HostTensor> actual = compiled.run(in, two);
      for (size_t i = 0; i < expected.size(); ++i)
        MAXC_REQUIRE_CLOSE(actual[i], expected[i], 0, 0);
    }
  }
}

TEST_CASE("GEMM with an epilogue at constant sizes emits only the panel variants it needs", "[codegen][gemm]") {
  // Constant M and N: a GEMM with an epilogue gets only the full/partial and
  // packed/direct panel variants its sizes reach; each combination here
  // needs a different subset.
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 10}, {1, 64}, {1, 70}, {7, 10}, {7, 64}, {7, 70}}) {
    INFO("M " << M << " N " << N);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {M, 33}, -1, 1), random_tensor(DType::f32, {33, N}, -1, 1),
                                  random_tensor(DType::f32, {N}, -1, 1)};
    auto graph = trace_graph(types_of(in), [](auto &x) {
      return std::vector<Tensor>{ops::relu(ops::matmul(x[0], x[1]) + x[2])};
    });
    REQUIRE(plan_lowering(*decompose(*graph)).epilogues.size() == 1);
    std::vector<HostTensor> expected = Interpreter::run(*graph, in);
    JitCompiledGraph compiled(*graph);
    for (bool two : {false, true})
      MAXC_REQUIRE_CLOSE(compiled.run(in, two)[0], expected[0], 1e-4, 1e-4);
  }
}

TEST_CASE("GEMM split into row blocks and panel groups: same bits on 1, 2 and 3 threads", "[codegen][gemm]") {
  // M x K past the A block (kABlockBytes): several row blocks (M above 252
  // rows), K blocks outside groups of column panels (N = 300: 10 panels, the
  // last one partial), a remainder of 5 single rows. Fresh inputs against
  // the reference; every thread count (the artifact's pool, and the
  // caller's even/odd split) must give the same bits as one thread.
  Dim m("m"), n("n"), k("k");
  auto graph = trace_graph({TensorType(DType::f32, {m, k}), TensorType(DType::f32, {k, n}), TensorType(DType::f32, {n})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]),
                                                        ops::relu(ops::matmul(x[0], x[1]) + x[2])};
                           });
  JitCompiledGraph compiled(*graph);
  for (auto [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{605, 300, 300}, {300, 520, 700}}) {
    INFO("M " << M << " N " << N << " K " << K);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {M, K}, -1, 1), random_tensor(DType::f32, {K, N}, -1, 1),
                                  random_tensor(DType::f32, {N}, -1, 1)};
    std::vector<HostTensor> expected = Interpreter::run(*graph, in);
    std::vector<HostTensor> one = compiled.run_threads(in, 1);
    for (size_t i = 0; i < expected.size(); ++i)
      MAXC_REQUIRE_CLOSE(one[i], expected[i], 1e-4, 2e-4);
    for (int threads : {2, 3}) {
      std::string mismatch = bitwise_mismatch(compiled.run_threads(in, threads), one);
      INFO(threads << " threads: " << mismatch);
      REQUIRE(mismatch.empty());
    }
    REQUIRE(bitwise_mismatch(compiled.run(in, true), one).empty());
  }
}

TEST_CASE("GEMM on the artifact's pool: back to back, and after its workers have gone to sleep", "[codegen][gemm]") {
  // The pool's workers poll for 0.5 ms after a job, then sleep: runs in
  // quick succession (workers awake) and after 2 ms (workers woken from
  // sleep) give the same bits as one thread.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {130, 70}, -1, 1), random_tensor(DType::f32, {70, 300}, -1, 1)};
  auto graph = trace_graph(types_of(in), [](auto &x) { return std::vector<Tensor>{ops::matmul(x[0], x[1])}; });
  JitCompiledGraph compiled(*graph);
  std::vector<HostTensor> one = compiled.run_threads(in, 1);
  MAXC_REQUIRE_CLOSE(one[0], Interpreter::run(*graph, in)[0], 1e-4, 1e-4);
  for (int i = 0; i < 20; ++i) {
    if (i % 5 == 4)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(bitwise_mismatch(compiled.run_threads(in, 2), one).empty());
  }
}

TEST_CASE("GEMM with batched A and an unbatched B folds the batch into M", "[codegen][gemm]") {
  // torch's [seq, 1, d] @ [d, n] projections: one GEMM of seq rows, not a
  // GEMV per entry. Symbolic batch dims, an epilogue reading the full index
  // (the C-shaped addend) and one reading the column (bias), 1 to 3 threads
  // (same bits); a batch of one keeps the per-entry loop.
  Dim s("s"), t("t");
  auto graph = trace_graph({TensorType(DType::f32, {s, t, 1, 24}), TensorType(DType::f32, {24, 40}),
                            TensorType(DType::f32, {s, t, 1, 40}), TensorType(DType::f32, {40}),
                            TensorType(DType::f32, {1, 3, 24})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]),
                                                        ops::relu(ops::matmul(x[0], x[1]) + x[2]),
                                                        ops::gelu(ops::matmul(x[0], x[1]) + x[3]),
                                                        ops::matmul(x[4], x[1])};
                           });
  JitCompiledGraph compiled(*graph);
  for (auto [S, T] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 3}, {50, 9}}) {
    INFO("s " << S << " t " << T);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {S, T, 1, 24}, -1, 1), random_tensor(DType::f32, {24, 40}, -1, 1),
                                  random_tensor(DType::f32, {S, T, 1, 40}, -1, 1), random_tensor(DType::f32, {40}, -1, 1),
                                  random_tensor(DType::f32, {1, 3, 24}, -1, 1)};
    std::vector<HostTensor> expected = Interpreter::run(*graph, in);
    std::vector<HostTensor> one = compiled.run_threads(in, 1);
    for (size_t i = 0; i < expected.size(); ++i)
      MAXC_REQUIRE_CLOSE(one[i], expected[i], 1e-4, 1e-4);
    for (int threads : {2, 3})
      REQUIRE(bitwise_mismatch(compiled.run_threads(in, threads), one).empty());
  }
}
