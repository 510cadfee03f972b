// The GPU kernel generator: one kernel *body* per kernel of a graph's
// LoweringPlan, written once and lowered three ways (GpuLowering.h): to
// AMDGPU, to NVPTX, and to a host emulation that runs every work-item of
// every workgroup on the CPU. The plan is the driver's, made with
// gpu_plan_options(): the GPU-only fusion decisions are a plan pass run
// once when the driver plans (Gpu/GpuPlan.h, refine_gpu_plans); this
// generator plans nothing, it only groups plan positions into launches
// (row kernels, positions whose results are all fused).
//
// A body is a short program of *phases* separated by workgroup barriers.
// A phase is an internal LLVM function
//   void phase(ptr buffers, ptr dims, i64 workgroup, i64 local_id,
//              ptr lds, ptr state, i64 iteration)
// run by every work-item of the workgroup: `buffers` holds the kernel's
// buffer pointers (GpuKernel::buffers order), `dims` one i64 per symbolic
// dim, `lds` the workgroup's shared tile, `state` the work-item's private
// state (kept across phases), `iteration` the trip of the enclosing loop
// step. A loop step repeats its body steps a uniform number of times (a
// trip-count function of buffers and dims), so a K loop of a tiled matmul
// is "load tile; barrier; accumulate; barrier" per trip.
//
// What one element is comes from the ElementalEmitter, shared with the CPU
// backend; only the mapping of work to work-items is GPU-specific.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/Graph.h"

#include <map>
#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace maxc::codegen {

/// grid (number of workgroups) = product over factors of ceil(extent / divisor).
struct GridFactor {
  Dim extent;
  int64_t divisor = 1;
};

/// A wave-level matrix multiply-accumulate (Gpu/GpuMatmul.h): each lane's
/// A and B operands and f32 accumulators at byte offsets of its private state.
struct WaveMma {
  int instruction = 0; // MatrixInstruction
  uint64_t a = 0, b = 0, c = 0;
};

/// A wave-level reduction (Gpu/GpuWaveReduce.h): each wave's lanes combine
/// the values at a byte offset of their private states, every lane ending
/// with the wave's total.
struct WaveReduce {
  uint64_t offset = 0;               // the value's byte offset in each work-item's state
  llvm::Function *combine = nullptr; // T (T, T): the reduction's combine, always-inline
  unsigned width = 64;               // lanes combined together (a power of two <= wave)
  unsigned wave = 64;                // the arch's wave size
};

struct KernelStep {
  llvm::Function *phase = nullptr;      // a phase, or (when null) a loop:
  llvm::Function *trip_count = nullptr; //   i64 (ptr buffers, ptr dims)
  std::vector<KernelStep> body;
  unsigned unroll = 0;                  // loop: llvm.loop.unroll.count on device (0: kept rolled, unroll.disable)
  std::vector<WaveMma> wave_ops;        // no phase, no trip count: matrix ops of every wave, no barrier
  std::vector<WaveReduce> wave_reduces; //   or wave-level reductions, no barrier
};

/// A buffer a kernel reads or writes: a stored graph value, or the caller's
/// output buffer `output` (copies of outputs that live elsewhere).
struct KernelBuffer {
  ValueId value = 0;
  int output = -1; // >= 0: output buffer, value unused
  bool operator==(const KernelBuffer &o) const { return value == o.value && output == o.output; }
};

struct GpuKernel {
  std::string name; // the entry point's symbol
  std::string kind; // elementwise, reduction, row, matmul, conv2d, copy
  unsigned workgroup_size = 256;
  uint64_t lds_bytes = 0;
  uint64_t state_bytes = 0;
  unsigned waves_per_eu = 0; // AMDGPU: amdgpu-waves-per-eu minimum (0: none) and an exact work-group size
  std::vector<GridFactor> grid;
  std::vector<KernelBuffer> buffers;
  /// Per buffer: the pointer is noalias (a workspace slot no other buffer
  /// of the kernel uses, or a read-only weight) and its alignment in bytes
  /// (16 for workspace slots and weights, which are 64-byte aligned; 0: the
  /// caller's input/output buffers, element alignment only).
  std::vector<bool> buffer_noalias;
  std::vector<unsigned> buffer_align;
  std::vector<KernelStep> steps;
  /// Every buffer it reads holds a constant (a weight, or a subgraph
  /// parameter every call site binds to one), or it reads none: the same
  /// results on every run. The generator fuses such values into their
  /// readers, so no kernel should have this set (tests check it).
  bool constant_inputs = false;
  std::string grid_text() const; // "ceil(batch*16/256)" for manifests
};

/// The launch sequence of one graph: kernels and subgraph calls in order.
struct GpuGraphProgram {
  const Graph *graph = nullptr;
  std::string tag; // "main" or "sub.<name>"
  LoweringPlan plan;
  struct Item {
    int kernel = -1;            // index into kernels, or
    const Node *call = nullptr; // a node run on the host: bodies (a call, a branch) or a symbol's definition
  };
  std::vector<Item> items;
  std::vector<GpuKernel> kernels;
};

/// Emits the kernel bodies of `root` and of each subgraph definition into
/// `module` (whose triple and data layout must already be set). Subgraphs
/// come first, sorted by name; the root graph is last. Kernel names are
/// `<prefix>.<tag>.k<N>`. The same inputs give the same kernels, buffers and
/// order in every module, so a host module and device modules agree.
/// `arch` (a gfx name, "" for none) selects the matrix-core GEMM kernels
/// (Gpu/GpuMatmul.h) where the arch has them; grids and buffers may differ
/// between arches, so host and device must be built for the same family.
/// `plans`: the driver's, of `root` and its subgraphs, made with
/// gpu_plan_options() (the GPU plan pass ran on them; anything else is an
/// internal error); null: planned here, for callers without a driver.
std::vector<GpuGraphProgram> emit_gpu_kernels(llvm::Module &module, const Graph &root, const std::string &prefix,
                                              const std::vector<std::string> &symbols, const std::string &arch = "",
                                              const LoweringPlans *plans = nullptr);

/// Kernel launches of one run of the root graph (the last program): its
/// kernels plus, per call, the callee's launches (grids that turn out empty
/// at run time are skipped by the host and still counted here).
uint64_t gpu_launch_count(const std::vector<GpuGraphProgram> &programs);

/// Ops the GPU backend cannot lower without libm on the device (f64
/// transcendentals, pow): a list of "node %3 'tanh' (f64)" descriptions,
/// empty when the graph (and its subgraphs) can be compiled for a GPU.
std::vector<std::string> gpu_unsupported_nodes(const Graph &root);

} // namespace maxc::codegen
