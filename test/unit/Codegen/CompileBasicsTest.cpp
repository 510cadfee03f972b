// The CPU code generator against the interpreter: first elementwise chains,
// broadcasting and symbolic dims.
#include "CompiledRunner.h"

using namespace maxc;
using namespace maxc::test;

TEST_CASE("compiled elementwise chain matches the interpreter", "[codegen][compile]") {
  HostTensor a = random_tensor(DType::f32, {4, 33}), b = random_tensor(DType::f32, {33});
  check_compiled({a, b}, [](auto &in) { return std::vector<Tensor>{ops::relu(in[0] * in[1] + 1.0)}; });
}
