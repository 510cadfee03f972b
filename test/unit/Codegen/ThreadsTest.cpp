// The CPU artifact's thread pool (lib/Codegen/Cpu/RuntimePool.c) and the
// task split of every kind of kernel (Cpu/KernelEmitter.cpp's
// emit_parallel_rows, Cpu/GemmEmitter.cpp's row blocks x panels): each graph
// is compiled once and run on 1, 2 and 3 threads of the artifact's pool and
// through a caller's parallel-for; the runs must give the same bits (the
// split depends on the shapes only, no reduction is split) and match the
// reference interpreter. Sizes are odd and just large enough to split
// (a task is ~16K elements; a GEMM splits above 64K multiply-adds).
//
// Tolerances as CompileOpsTest.cpp: kF32Math (1e-5, 1e-6) for f32
// transcendentals and decomposed norms, (1e-4, 1e-5) where f32 accumulates.
#include "CompiledRunner.h"

#include "maxc/Driver/Compile.h"

using namespace maxc;
using namespace maxc::test;

TEST_CASE("threads: elementwise loop nests, output copies and rank-1 vectors split into tasks", "[codegen][threads]") {
  check_threads({random_tensor(DType::f32, {67, 301}, -2, 2), random_tensor(DType::f32, {301}),
                 random_tensor(DType::f32, {40003}, -2, 2), random_tensor(DType::f32, {3, 5, 37, 7, 11})},
                [](auto &x) {
                  return std::vector<Tensor>{ops::gelu(x[0]) * x[1] + 1.0,   // rows of 301, broadcast operand
                                             ops::transpose(x[0], {1, 0}),   // an output copy, remapped
                                             ops::exp(x[2]),                 // rank 1: chunks of one dim
                                             ops::tanh(x[3]) * 2.0};         // rank 5, small last dims
                },
                1e-5, 1e-6);
}

TEST_CASE("threads: reductions, softmax and layer norm split by rows", "[codegen][threads]") {
  check_threads({random_tensor(DType::f32, {301, 129}, -3, 3), random_tensor(DType::f32, {129}),
                 random_tensor(DType::f32, {129})},
                [](auto &x) {
                  return std::vector<Tensor>{ops::sum(x[0], {1}),                // a row per output element
                                             ops::mean(x[0], {0}),               // columns: strided reads
                                             ops::max(x[0] * x[0], {1}, true),
                                             ops::softmax(x[0]),
                                             ops::layer_norm(x[0], x[1], x[2])};
                },
                1e-5, 1e-5);
}

TEST_CASE("threads: small kernels stay on the calling thread", "[codegen][threads]") {
  HostTensor x = random_tensor(DType::f32, {40, 400}, -1, 1), w = random_tensor(DType::f32, {400, 4}, -1, 1);
  auto graph = trace_graph(types_of({x, w}), [](auto &in) {
    return std::vector<Tensor>{ops::exp(in[0]), ops::matmul(in[0], in[1])}; // 16000 elements, 64000 MACs
  });
  JitCompiledGraph compiled(*graph);
  task_counts().clear();
  compiled.run_through({x, w}, counting_parallel_for);
  REQUIRE(task_counts().empty());
}

TEST_CASE("threads: GEMM row blocks x column panels, epilogue, batched, GEMV-like", "[codegen][threads]") {
  check_threads({random_tensor(DType::f32, {130, 77}, -1, 1), random_tensor(DType::f32, {77, 99}, -1, 1),
                 random_tensor(DType::f32, {99}), random_tensor(DType::f32, {3, 70, 50}, -1, 1),
                 random_tensor(DType::f32, {3, 50, 45}, -1, 1), random_tensor(DType::f32, {5, 300}, -1, 1),
                 random_tensor(DType::f32, {300, 200}, -1, 1)},
                [](auto &x) {
                  return std::vector<Tensor>{ops::relu(ops::matmul(x[0], x[1]) + x[2]), // 3 row blocks x 4 panels
                                             ops::matmul(x[3], x[4]),                   // per batch
                                             ops::matmul(x[5], x[6])};                  // M < 6: panels only
                },
                1e-4, 1e-5);
}

TEST_CASE("threads: convolution and pooling", "[codegen][threads]") {
  ops::Conv2dOptions grouped;
  grouped.groups = 3;
  grouped.padding = {1, 1, 1, 1};
  check_threads({random_tensor(DType::f32, {2, 3, 41, 37}), random_tensor(DType::f32, {8, 3, 3, 3}),
                 random_tensor(DType::f32, {8}), random_tensor(DType::f32, {6, 1, 3, 3})},
                [grouped](auto &x) {
                  return std::vector<Tensor>{ops::relu(ops::conv2d(x[0], x[1], x[2])), // im2col + GEMM
                                             ops::conv2d(x[0], x[3], std::nullopt, grouped), // direct loops
                                             ops::max_pool2d(x[0])};
                },
                1e-4, 1e-5);
}

TEST_CASE("threads: the pool starts, changes size and stops between runs", "[codegen][threads]") {
  // 2.1M elements: above the pool's MAXC_RT_MIN_WORK (2^21), so the job
  // goes to the workers even when they are cold.
  HostTensor x = random_tensor(DType::f32, {1031, 2039}, -2, 2);
  auto graph = trace_graph(types_of({x}), [](auto &in) { return std::vector<Tensor>{ops::exp(in[0]) + in[0]}; });
  JitCompiledGraph compiled(*graph);
  std::vector<HostTensor> one = compiled.run_threads({x}, 1);
  task_counts().clear();
  REQUIRE(bitwise_mismatch(compiled.run_through({x}, counting_parallel_for), one).empty());
  REQUIRE(task_counts() == std::vector<int64_t>{129}); // 1031 rows of 2039: 8 rows a task
  for (int threads : {4, 2, 1, 3, 3, 0, 2}) { // 0: as 1
    INFO(threads << " threads");
    REQUIRE(bitwise_mismatch(compiled.run_threads({x}, threads), one).empty());
  }
  for (int i = 0; i < 300; ++i) // many jobs in a row: no lost wake-up, no stale worker
    REQUIRE(bitwise_mismatch(compiled.run_threads({x}, 3), one).empty());
  compiled.run_threads({x}, 2);
  // Two runs at once on one pool: the second runs its tasks itself.
  std::vector<HostTensor> other;
  std::thread t([&] { other = compiled.run_threads({x}, 2); });
  std::vector<HostTensor> here = compiled.run_threads({x}, 2);
  t.join();
  REQUIRE(bitwise_mismatch(here, one).empty());
  REQUIRE(bitwise_mismatch(other, one).empty());
}

TEST_CASE("threads: a small job runs on the calling thread while the workers are cold, a large one on the pool",
          "[codegen][threads]") {
  // exp over 40 x 4001 (160K units, 10 tasks) and over 2053 x 4099 (8.4M,
  // above MAXC_RT_FAR_MIN_WORK, the threshold's largest value whatever the
  // hand-off latency measured): on 2 threads the small one never wakes a
  // worker; the large one is handed to the pool (the profile's `threads`:
  // the most threads a job ran on, 2 once the worker joined one).
  auto most_threads = [](const HostTensor &x, int runs) {
    auto graph = trace_graph(types_of({x}), [](auto &in) { return std::vector<Tensor>{ops::exp(in[0])}; });
    driver::HostProfile p = driver::profile_on_host(*graph, {x}, {}, 2, runs, 0);
    int64_t most = 0;
    for (const KernelCounter &c : p.counters)
      most = std::max(most, c.threads);
    return most;
  };
  CHECK(most_threads(random_tensor(DType::f32, {40, 4001}), 20) == 1);
  // A worker that never got a core (a starved machine) joins no job: a few tries.
  int64_t large = 0;
  for (int attempt = 0; attempt < 5 && large < 2; ++attempt)
    large = most_threads(random_tensor(DType::f32, {2053, 4099}), 10);
  CHECK(large == 2);
}
