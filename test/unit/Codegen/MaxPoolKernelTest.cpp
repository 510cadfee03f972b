// The vectorized f32 max_pool2d kernel of the CPU code generator
// (emit_max_pool_f32, Cpu/ConvEmitter.h) against the reference interpreter
// on fresh random inputs: rows of more than one vector of outputs (a masked
// last chunk), strides 1 and 2, symmetric and asymmetric padding, NaN and
// infinities (NaN wins, padding never does), batch 2, kernels 2 and 3,
// several bands of output rows (the tasks); 1, 2 and 3 threads give the
// same bits. Exact: a max picks one of its inputs.
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

size_t max_pool_kernels(const Graph &graph) {
  return count_model_functions(graph, [](llvm::StringRef name) { return name.starts_with("m.max_pool"); });
}

} // namespace

TEST_CASE("max pool kernel: vectors of output columns vs the interpreter", "[codegen][conv][pool]") {
  struct Case {
    const char *name;
    std::vector<int64_t> x, kernel, stride, padding;
  };
  const Case cases[] = {
      {"3x3 stride 2 pad 1 (ResNet's), 41 wide: two chunks", {2, 5, 9, 41}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {"2x3 stride (1, 2), asymmetric pad", {1, 3, 6, 37}, {2, 3}, {1, 2}, {1, 0, 0, 2}},
      {"3x3 stride 1 pad 1, 35 wide", {1, 4, 5, 35}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      // Bands of output rows: 5 tasks of 8 rows, the last one of 6.
      {"3x3 stride 2 pad 1, 38 rows: five row bands", {1, 16, 75, 70}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {"2x2 stride 2, no padding, 9 wide (one masked chunk)", {2, 3, 11, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {"2x2 stride 1, bottom/right pad, 17 wide", {1, 24, 30, 17}, {2, 2}, {1, 1}, {0, 0, 1, 1}},
      {"3x2 stride (2, 1), pad top 2 (a window of one row)", {1, 12, 40, 33}, {3, 2}, {2, 1}, {2, 1, 0, 0}},
      // One job over the images: tasks (image, band).
      {"batch 9 of 14x14, 3x3 stride 2, bottom/right pad (Keras')", {9, 6, 14, 14}, {3, 3}, {2, 2}, {0, 0, 1, 1}},
      {"batch 3, five row bands each: 15 tasks", {3, 16, 75, 70}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    HostTensor x = random_tensor(DType::f32, c.x);
    x.set_f64(7, std::numeric_limits<double>::quiet_NaN());
    x.set_f64(40, std::numeric_limits<double>::infinity());
    x.set_f64(41, -std::numeric_limits<double>::infinity());
    ops::Pool2dOptions o;
    o.kernel = c.kernel;
    o.stride = c.stride;
    o.padding = c.padding;
    auto g = trace_graph(types_of({x}), [&](auto &t) { return std::vector<Tensor>{ops::max_pool2d(t[0], o)}; });
    CHECK(max_pool_kernels(*g) == 1);
    std::vector<HostTensor> expected = Interpreter::run(*g, {x});
    std::vector<HostTensor> got = run_compiled_threads(*g, {x});
    std::string m = compare(got[0], expected[0], 0, 0);
    INFO(m);
    CHECK(m.empty());
  }
}

// A max pool of u8 / i8 values widened to f32 (a QDQ model's MaxPool, its
// Q/DQ pair dropped): the CPU plan fuses the cast and the kernel reads the
// bytes (PoolInput), widening them as it loads (the last chunk masked, past
// W -inf); the result cast back to 8 bits, or kept in f32.
TEST_CASE("max pool kernel: 8-bit input widened in the kernel", "[codegen][conv][pool][qgemm]") {
  for (DType dt : {DType::u8, DType::i8}) {
    HostTensor x = dt == DType::u8 ? random_tensor(dt, {2, 5, 19, 41}, 0, 255) : random_tensor(dt, {2, 5, 19, 41}, -128, 127);
    ops::Pool2dOptions o;
    o.kernel = {3, 3};
    o.stride = {2, 2};
    o.padding = {1, 1, 1, 1};
    auto build = [&](auto &t) {
      Tensor p = ops::max_pool2d(ops::cast(t[0], DType::f32), o);
      return std::vector<Tensor>{ops::cast(p, dt), ops::mul(ops::max_pool2d(ops::cast(t[1], DType::f32), o),
                                                            ops::scalar(0.5, DType::f32))};
    };
    auto g = trace_graph(types_of({x, x}), build);
    INFO(dtype_name(dt));
    CHECK(max_pool_kernels(*g) == 2);
    auto lowered = decompose(*g, {true, true});
    LoweringPlan plan = plan_lowering(*lowered, cpu_plan_options());
    size_t fused = 0;
    for (const Node &n : lowered->nodes())
      if (n.op == "max_pool2d")
        fused += plan.values[n.operands[0]].storage == Storage::fused;
    CHECK(fused == 2);
    std::vector<HostTensor> expected = Interpreter::run(*g, {x, x});
    std::vector<HostTensor> got = run_compiled_threads(*g, {x, x});
    for (size_t i = 0; i < 2; ++i) {
      std::string m = compare(got[i], expected[i], 0, 0);
      INFO(m);
      CHECK(m.empty());
    }
  }
}
