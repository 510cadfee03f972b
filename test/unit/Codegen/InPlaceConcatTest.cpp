// In-place concat and split (PlanOptions::in_place_concat, the CPU's plan):
// a concat's stored operands are computed straight into their slices of its
// result, a split's stored results are slices of its operand, so neither
// node has a kernel. Golden plans (describe_plan) and the compiled graphs
// against the reference interpreter at 1, 2 and 3 threads (same bits).
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

#include <algorithm>

using namespace maxc;
using namespace maxc::test;

namespace {

ops::Conv2dOptions same3x3() {
  ops::Conv2dOptions o;
  o.padding = {1, 1, 1, 1};
  return o;
}

// YOLOv8's C2f block: y = silu(conv1x1(x)); a, b = split(y); m0 = b +
// silu(conv3x3(b)); m1 = m0 + silu(conv3x3(m0)); conv1x1(concat(a, b, m0, m1)).
std::vector<Tensor> c2f(const std::vector<Tensor> &in) {
  Tensor y = ops::silu(ops::conv2d(in[0], in[1], in[2]));
  std::vector<Tensor> ab = ops::split(y, {4, 4}, 1);
  Tensor m0 = ab[1] + ops::silu(ops::conv2d(ab[1], in[3], std::nullopt, same3x3()));
  Tensor m1 = m0 + ops::silu(ops::conv2d(m0, in[4], std::nullopt, same3x3()));
  return {ops::conv2d(ops::concat({ab[0], ab[1], m0, m1}, 1), in[5])};
}

std::vector<HostTensor> c2f_inputs(int64_t h, int64_t w) {
  return {random_tensor(DType::f32, {1, 6, h, w}, -1, 1), random_tensor(DType::f32, {8, 6, 1, 1}, -0.5, 0.5),
          random_tensor(DType::f32, {8}),                 random_tensor(DType::f32, {4, 4, 3, 3}, -0.3, 0.3),
          random_tensor(DType::f32, {4, 4, 3, 3}, -0.3, 0.3), random_tensor(DType::f32, {5, 16, 1, 1}, -0.5, 0.5)};
}

} // namespace

TEST_CASE("in-place concat: C2f's split and concat move no data", "[codegen][plan][concat]") {
  auto g = trace_graph(types_of(c2f_inputs(8, 8)), c2f);
  auto lowered = decompose(*g);
  LoweringPlan plan = plan_lowering(*lowered, cpu_plan_options());
  // The first conv's SiLU is placed at the concat's start (its split
  // slices with it), m0 and m1 at their slices: one slot of 16x8x8 floats.
  CHECK(describe_plan(*lowered, plan) == "%6 conv2d: fused (GEMM epilogue -> %7)\n"
                                         "%7 silu: temp slot 0 (4096 bytes) at +0\n"
                                         "%8 split: temp slot 0 (4096 bytes) at +0 (in place)\n"
                                         "%9 split: temp slot 0 (4096 bytes) at +1024 (in place)\n"
                                         "%10 conv2d: fused (GEMM epilogue -> %12)\n"
                                         "%11 silu: fused\n"
                                         "%12 add: temp slot 0 (4096 bytes) at +2048\n"
                                         "%13 conv2d: fused (GEMM epilogue -> %15)\n"
                                         "%14 silu: fused\n"
                                         "%15 add: temp slot 0 (4096 bytes) at +3072\n"
                                         "%16 concat: temp slot 0 (4096 bytes) (in place)\n"
                                         "%17 conv2d: output 0\n");
  CHECK(plan.in_place.size() == 2);
  for (size_t n : plan.kernels)
    CHECK((lowered->nodes()[n].op != "concat" && lowered->nodes()[n].op != "split"));
  // Without the option (the GPU backends' plan): the copies stay.
  LoweringPlan plain = plan_lowering(*lowered);
  CHECK(plain.in_place.empty());
  CHECK(plain.slot_offsets.empty());
}

TEST_CASE("in-place concat: where a concat or split keeps its copy", "[codegen][plan][concat]") {
  // An input operand, an operand read by two concats (the second copies),
  // a concat along an axis whose slices are not contiguous (batch 2), and
  // an operand listed twice. (Max pools read them: a concat read by one
  // elementwise op would be fused into it.)
  auto g = trace_graph({TensorType(DType::f32, {1, 3, 4, 4}), TensorType(DType::f32, {2, 3, 4, 4})}, [](auto &in) {
    Tensor e = ops::exp(in[0]);
    Tensor t = ops::tanh(in[0]);
    Tensor first = ops::concat({e, t}, 1);           // in place
    Tensor second = ops::concat({t, in[0]}, 1);      // t is placed already, in[0] an input: copied
    Tensor third = ops::concat({ops::exp(in[1]), ops::tanh(in[1])}, 1); // batch 2: not contiguous
    Tensor s = ops::sigmoid(in[0]);
    Tensor fourth = ops::concat({s, s}, 1);          // one value twice
    return std::vector<Tensor>{ops::max_pool2d(first), ops::max_pool2d(second), ops::max_pool2d(third),
                               ops::max_pool2d(fourth)};
  });
  LoweringPlan plan = plan_lowering(*g, cpu_plan_options());
  INFO(describe_plan(*g, plan));
  REQUIRE(plan.in_place.size() == 1);
  CHECK(g->nodes()[*plan.in_place.begin()].op == "concat");
  CHECK(plan.slot_offsets.size() == 2);
}

TEST_CASE("in-place concat: compiled C2f, SPPF and a split of a split match the reference", "[codegen][concat][threads]") {
  // C2f at a size whose convs split into tasks.
  check_threads(c2f_inputs(24, 20), [](auto &in) { return c2f(in); }, 1e-4, 1e-5);
  // SPPF: concat(x, p(x), p(p(x)), p(p(p(x)))), 5x5 max pools, stride 1;
  // and a split of a split, its pieces read by elementwise kernels and a
  // concat in another order (not in place: the slices do not line up).
  ops::Pool2dOptions pool;
  pool.kernel = {5, 5};
  pool.stride = {1, 1};
  pool.padding = {2, 2, 2, 2};
  check_threads({random_tensor(DType::f32, {1, 8, 20, 20}, -2, 2), random_tensor(DType::f32, {4, 8, 1, 1}),
                 random_tensor(DType::f32, {3, 16, 1, 1})},
                [pool](auto &in) {
                  Tensor x = ops::relu(ops::conv2d(in[0], in[1]));
                  Tensor p1 = ops::max_pool2d(x, pool), p2 = ops::max_pool2d(p1, pool), p3 = ops::max_pool2d(p2, pool);
                  Tensor sppf = ops::concat({x, p1, p2, p3}, 1);
                  std::vector<Tensor> halves = ops::split(ops::exp(in[0]), {5, 3}, 1);
                  std::vector<Tensor> quarters = ops::split(halves[0], {2, 3}, 1);
                  Tensor swapped = ops::concat({quarters[1], quarters[0], halves[1]}, 1);
                  return std::vector<Tensor>{ops::conv2d(sppf, in[2]), swapped * 2.0,
                                             quarters[0] + 1.0, ops::tanh(halves[1])};
                },
                1e-4, 1e-5);
}
