// The CPU code generator against the interpreter: first elementwise chains,
// broadcasting and symbolic dims.
#include "CompiledRunner.h"

using namespace maxc;
using namespace maxc::test;

TEST_CASE("compiled elementwise chain matches the interpreter", "[codegen][compile]") {
  HostTensor a = random_tensor(DType::f32, {4, 33}), b = random_tensor(DType::f32, {33});
  check_compiled({a, b}, [](auto &in) { return std::vector<Tensor>{ops::relu(in[0] * in[1] + 1.0)}; });
}

TEST_CASE("compiled concat and pad never read an operand that is empty at run time", "[codegen][compile]") {
  for (int64_t batch : {0, 2}) {
    INFO("batch " << batch);
    HostTensor a = random_tensor(DType::f32, {batch, 2}), b = random_tensor(DType::f32, {3, 2});
    check_compiled({a, b}, [](auto &in) {
      return std::vector<Tensor>{ops::concat({in[0], in[1], in[0]}, 0), ops::pad(in[0], {1, 1, 0, 2}, 7.0)};
    }, 0, 0);
  }
}
