// Float sum / mean / max / min over axes that keep the last dim, which the
// CPU runs by blocks of columns (KernelEmitter's emit_column_reduction: the
// reduced elements of a block of columns read contiguously): against the
// reference interpreter, with NaN and infinities, a partial last block and
// a fused producer, at 1, 2 and 3 threads (same bits).
#include "CompiledRunner.h"

#include <limits>

using namespace maxc;
using namespace maxc::test;

TEST_CASE("column reductions: blocks of columns, NaN, a partial block, a fused producer", "[codegen][reduction]") {
  for (DType d : {DType::f32, DType::f64}) {
    INFO(dtype_name(d));
    HostTensor x = random_tensor(d, {3, 5, 300}, -3, 3);
    x.set_f64(2 * 300 + 17, std::numeric_limits<double>::quiet_NaN());       // [0, 2, 17]
    x.set_f64((5 + 4) * 300 + 299, std::numeric_limits<double>::quiet_NaN()); // [1, 4, 299]: the last block
    x.set_f64(10 * 300 + 40, std::numeric_limits<double>::infinity());
    x.set_f64(11 * 300 + 41, -std::numeric_limits<double>::infinity());
    check_threads({x, random_tensor(d, {3, 16, 4, 40}, -2, 2)},
                  [](auto &in) {
                    return std::vector<Tensor>{ops::sum(in[0], {1}),
                                               ops::mean(in[0], {0, 1}, true),
                                               ops::max(in[0], {1}, true),
                                               ops::min(in[0], {0}),
                                               ops::max(in[0], {-3}),
                                               // YOLOv8's DFL: a softmax over axis 1, decomposed
                                               ops::sum(ops::exp(in[1] - ops::max(in[1], {1}, true)), {1}, true)};
                  },
                  1e-5, 1e-6);
  }
}
