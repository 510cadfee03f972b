// Task splitting of the CPU row kernels (softmax, log_softmax, layer_norm,
// rms_norm: Cpu/NormEmitter.h, emitted by Cpu/KernelEmitter.cpp's emit_rows)
// and of the dot-product matmul loops (non-f32 matmuls): each graph is
// compiled once; a counting parallel-for proves each kernel is split into
// several tasks (or stays on the calling thread when small), and runs on 1, 2
// and 3 threads of the artifact's pool and through a caller's parallel-for
// must give the same bits (a row, and each dot product, is never split) and
// match the reference interpreter on fresh random inputs of odd sizes.
//
// Tolerances: the row kernels' (RowKernelTest.cpp: rtol 1e-5, atol 1e-6);
// f64 matmuls 1e-12; integer matmuls exact.
#include "CompiledRunner.h"

using namespace maxc;
using namespace maxc::test;

namespace {


/// `build` on `inputs`: the task count of every parallel_for call (one per
/// split kernel, in kernel order), after checking the same bits at 1, 2 and
/// 3 threads and the interpreter's values.
std::vector<int64_t> split_counts(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol,
                                  double atol) {
  auto [graph, actual] = check_threads(inputs, build, rtol, atol);
  JitCompiledGraph compiled(*graph);
  task_counts().clear();
  REQUIRE(bitwise_mismatch(compiled.run_through(inputs, counting_parallel_for), actual).empty());
  return task_counts();
}

} // namespace

TEST_CASE("parallel rows: softmax, log_softmax, layer_norm and rms_norm split by rows", "[codegen][threads][rows]") {
  // Rows of 4 units per element; ~16K units a task.
  std::vector<int64_t> counts = split_counts(
      {random_tensor(DType::f32, {211, 97}, -6, 6), random_tensor(DType::f32, {3, 67, 53}, -6, 6),
       random_tensor(DType::f32, {59, 13, 29}, -2, 3), random_tensor(DType::f32, {13, 29}),
       random_tensor(DType::f32, {13, 29}), random_tensor(DType::f32, {173, 101}), random_tensor(DType::f32, {101})},
      [](auto &x) {
        return std::vector<Tensor>{ops::softmax(x[0]),                // 211 rows of 97: 42 a task
                                   ops::log_softmax(x[1], -1),        // 201 rows of 53 (two outer dims)
                                   ops::layer_norm(x[2], x[3], x[4]), // 59 rows of 13 x 29
                                   ops::rms_norm(x[5], x[6])};        // 173 rows of 101
      },
      1e-5, 1e-6);
  REQUIRE(counts == std::vector<int64_t>{6, 3, 6, 5});
}

TEST_CASE("parallel rows: a small row kernel stays on the calling thread", "[codegen][threads][rows]") {
  std::vector<int64_t> counts = split_counts(
      {random_tensor(DType::f32, {31, 127}, -6, 6), random_tensor(DType::f32, {1, 4095}, -6, 6)},
      [](auto &x) {
        return std::vector<Tensor>{ops::softmax(x[0]),  // 3937 elements: one task's work
                                   ops::softmax(x[1])}; // one long row: never split
      },
      1e-5, 1e-6);
  REQUIRE(counts.empty());
}

TEST_CASE("parallel rows: dot-product matmuls (f64, i64, broadcast batch) split by rows of C", "[codegen][threads]") {
  std::vector<int64_t> counts = split_counts(
      {random_tensor(DType::f64, {67, 45}, -1, 1), random_tensor(DType::f64, {45, 53}, -1, 1),
       random_tensor(DType::i64, {3, 37, 41}, -9, 9), random_tensor(DType::i64, {41, 29}, -9, 9)},
      [](auto &x) {
        return std::vector<Tensor>{ops::matmul(x[0], x[1]),  // 67 rows, 2385 multiply-adds each: 6 a task
                                   ops::matmul(x[2], x[3])}; // 3 x 37 rows of 1189
      },
      1e-12, 1e-12);
  REQUIRE(counts == std::vector<int64_t>{12, 9});
}
