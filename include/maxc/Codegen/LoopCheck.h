// The cliff check of a CPU module, after optimization: innermost loops of
// the kernels' task functions that the vectorizer left scalar while they
// step through memory by more than a cache line per iteration (issue 22:
// PaddleOCR's detector spent 71 % in one such kernel, and Kokoro's row
// kernels ran scalar because their row stride was reloaded per element).
// Task functions carry the attribute kKernelAttr (the model node whose
// kernel they run), set where the kernel emitter creates them. `maxc
// profile` prints what it finds (docs/profiling.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace maxc {

/// The function attribute naming the model node a task function computes.
inline constexpr const char *kKernelAttr = "maxc-kernel";

/// The function attribute marking a tagged task whose code a dedicated
/// kernel emitter wrote (GEMM panels, convolutions, attention, integer
/// GEMMs): only its strided loops are reported. Their unit-stride loops
/// that the vectorizer declines are edge and epilogue passes at most two
/// GEMM panels wide (a conv's bias + ReLU over the last columns), not the
/// layout cliffs the check is for.
inline constexpr const char *kDedicatedKernelAttr = "maxc-kernel-dedicated";

/// Tags `task` as computing the kernel of node `node_name` (`dedicated`:
/// written by a dedicated kernel emitter, kDedicatedKernelAttr).
void tag_kernel_task(llvm::Function &task, const std::string &node_name, bool dedicated = false);

/// One scalar innermost loop that reads or writes floats.
struct ScalarStridedLoop {
  std::string function; // the task function (NAME.rows.N)
  std::string node;     // the model node its kernel computes (kKernelAttr)
  int64_t stride_bytes; // the largest constant |step| of a float load or store stream per element it
                        // reads (the step over its accesses in one iteration: an unrolled dense
                        // stream is 4 bytes; 0: none constant)
  bool store;           // that access is a store
  bool declined;        // the vectorizer did not vectorize the loop (no llvm.loop.isvectorized)
};

/// Accesses farther apart than this per iteration, in a loop that runs one
/// element at a time, are a cliff: each touches its own cache line.
inline constexpr int64_t kCliffStrideBytes = 64;

/// Loops of at most this many iterations are not reported (a scalar
/// remainder of a vectorized loop, split by runtime unrolling).
inline constexpr unsigned kShortLoopTrips = 16;

/// The innermost loops of `module`'s tagged task functions that hold no
/// vector instruction and load or store floats, either with a constant
/// stride of more than kCliffStrideBytes or in a loop the vectorizer
/// declined (not in dedicated tasks; one entry per loop, sorted by
/// function). The vectorizer's own
/// scalar remainder loops (marked llvm.loop.isvectorized) with short
/// strides and loops of at most kShortLoopTrips iterations are not
/// reported.
std::vector<ScalarStridedLoop> scalar_strided_loops(llvm::Module &module);

} // namespace maxc
