// The lowering plan of one graph (root or subgraph): which values get
// memory and where (fusion decisions), and the workspace slots temporaries
// share by liveness. Pure IR analysis, no LLVM, so it is tested on its own.
#pragma once

#include "maxc/IR/Graph.h"

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace maxc {

enum class Storage {
  input,    // the caller's buffer for graph input `index`
  output,   // the caller's buffer for graph output `index`
  constant, // a global holding a graph constant
  temp,     // workspace slot `index`
  fused,    // never stored: recomputed inside the kernel that reads it
};

struct ValuePlan {
  Storage storage = Storage::fused;
  size_t index = 0;
};

struct WorkspaceSlot {
  Dim bytes; // size, rounded up to 64 bytes when laid out
};

struct LoweringPlan {
  std::vector<ValuePlan> values;     // by ValueId
  std::vector<WorkspaceSlot> slots;  // temporaries, shared by liveness
  /// Graph outputs whose value lives elsewhere (an input, a constant or an
  /// earlier output): copied into output buffer `first` from value `second`.
  std::vector<std::pair<size_t, ValueId>> output_copies;
  /// Node indices whose results are computed by a kernel of their own, in
  /// execution order. A GEMM node with an epilogue runs at the position of
  /// the node that computes its epilogue's stored value (every operand of
  /// the chain exists by then); that node gets no kernel of its own.
  std::vector<size_t> kernels;
  /// GEMM epilogues: a GEMM node (a matmul_uses_gemm / conv_uses_gemm node)
  /// whose result feeds a single-use chain of same-shape elementwise ops
  /// ends with that chain: its result is fused, and the GEMM kernel computes
  /// the chain tile by tile, writing the first stored value of the chain.
  std::map<size_t, ValueId> epilogues; // GEMM node index -> the stored value its epilogue chain computes
  /// A slot for kernels' private scratch (the im2col matrix of a convolution
  /// lowered to GEMM); only one kernel runs at a time, so they share it.
  /// npos when no kernel needs scratch.
  size_t scratch_slot = static_cast<size_t>(-1);
  /// Matmuls whose kernel stores its result straight through a chain of
  /// transposes/reshapes (the attention heads' merge): matmul node index ->
  /// the view nodes, in order; the matmul's result and the views' are
  /// fused, the last view's result is the stored value the matmul writes.
  /// Made by the GPU backends' plan pass (refine_gpu_plans); empty otherwise.
  std::map<size_t, std::vector<size_t>> stored_through;
  /// Refined by the GPU backends' plan pass (gpu_plan_options): the plan
  /// the GPU kernel generator takes.
  bool gpu = false;
  /// In-place concat and split (PlanOptions::in_place_concat): temporaries
  /// that live inside another value's slot, at this byte offset from the
  /// slot's start (their `index` is that slot). A concat's operands are
  /// placed in their slices of its result, a split's results in their
  /// slices of its operand; a value not listed starts its slot.
  std::map<ValueId, int64_t> slot_offsets;
  /// Nodes whose stored results are already in place (that concat or
  /// split): no kernel, not in `kernels`.
  std::set<size_t> in_place;
};

/// The plans of a graph and of each of its subgraphs, by graph: the
/// compile pipeline plans once and hands these to the emitters.
using LoweringPlans = std::map<const Graph *, LoweringPlan>;

/// True for a conv2d the code generator lowers as im2col + GEMM (f32, one
/// group); its scratch bytes are returned in `bytes`.
bool conv_uses_gemm(const Graph &graph, const Node &node, int64_t *bytes = nullptr);

/// True for an f32 single-group conv2d with static channels and kernel but
/// a symbolic height or width: conv_uses_gemm too, lowered as a GEMM whose
/// N = OH*OW is read at run time, after a run-time im2col (none for a
/// pointwise conv) into conv_symbolic_scratch bytes of the scratch slot.
bool conv_is_symbolic_gemm(const Graph &graph, const Node &node);
/// The im2col bytes of a conv_is_symbolic_gemm conv: C*KH*KW*OH*OW*4.
Dim conv_symbolic_scratch(const Graph &graph, const Node &node);

/// The scratch a `loop` node's CPU kernel takes (the plan's scratch slot,
/// shared with the other kernels' scratch: one kernel runs at a time): the
/// iteration number and two conditions (kLoopScalarBytes each), then a
/// second set of the carried values, each rounded up to 64 bytes (the body
/// reads one set and writes the other, alternating).
constexpr int64_t kLoopScalarBytes = 64;
Dim loop_scratch_bytes(const Graph &graph, const Node &node);

/// A 1x1 conv2d with stride 1 and no padding: each image [C, H*W] is
/// already the GEMM's B operand (no im2col, no scratch).
bool conv_is_pointwise(const Graph &graph, const Node &node);

/// The implicit-im2col lowering of a conv_uses_gemm conv that is neither
/// pointwise nor Winograd (Cpu/ConvEmitter.h, emit_conv_blocks_f32): one
/// job of `blocks` tasks, task t owning output rows [t * rows, t * rows +
/// rows): it packs its own slice of colsT (K x rows*OW floats, at most
/// kConvBlockBytes, at scratch + t * K * rows * OW), runs the GEMM over it
/// and the epilogue, so no colsT line crosses cores. Rows: as many as fit
/// in kConvBlockBytes, at most ceil(OH / kConvBlockMinTasks); taken (blocks
/// > 0) when that gives at least kConvBlockMinTasks - 1 tasks of at least
/// kConvBlockMinColumns columns, else blocks = 0 (im2col job + GEMM job).
constexpr int64_t kConvBlockBytes = 192 * 1024, kConvBlockMinTasks = 8, kConvBlockPanel = 32;
struct ConvBlockPlan {
  int64_t rows = 0, blocks = 0;
};
ConvBlockPlan conv_block_plan(const Graph &graph, const Node &node);

/// A conv with few output positions and many output channels — P = OH * OW
/// at most kConvTransposedMaxPositions and not a multiple of
/// kConvBlockPanel, O a multiple of kConvBlockPanel and at least
/// kConvTransposedMinChannels (f32, static, one group, not pointwise, no
/// Winograd, no row blocks, the weight a constant): the CPU runs the GEMM
/// transposed, colsᵀ [P, K] × Wᵀ [K, O] with the weight packed at compile
/// time as its B (Cpu/GemmPanels.h), then writes the [P, O] product back
/// transposed through the bias and the plan's chain. The usual [O, K] ×
/// [K, P] fills its last column panel with padding at such P (a 1-D audio
/// conv's 81 positions: 5 panels of 16 and one column) and packs its B,
/// the im2col, on every run. Scratch: colsᵀ and the product, (K + O) * P
/// floats.
constexpr int64_t kConvTransposedMaxPositions = 128, kConvTransposedMinChannels = 64;
bool conv_uses_transposed_gemm(const Graph &graph, const Node &node);

/// Winograd's channel rule: the transforms cost O((m+2)^2*(C+O)) per tile,
/// the GEMMs O((m+2)^2*O*C), so it pays where 1/C + 1/O <= 1/16 (C = O = 32,
/// as measured on ResNet-18; also C = 96, O = 24 in PP-OCRv3's detector neck),
/// with at least kWinogradMinChannels of each.
constexpr int64_t kWinogradMinChannels = 16;
constexpr int64_t kWinogradChannelRatio = 16;
/// True for a conv_uses_gemm conv2d that the CPU lowers through Winograd
/// F(m,3) (Cpu/WinogradEmitter.h) when its weight is constant: 3x3, stride 1,
/// dilation 1, input and output channels by the rule above, an
/// output of a size winograd_tile() gives a tile for, and not `exact` (the
/// transforms round: an exact conv takes the im2col GEMM). Its scratch
/// (conv_uses_gemm) covers the transforms.
bool conv_winograd_shape(const Graph &graph, const Node &node);
/// The Winograd output tile m (F(m,3)) for an OH x OW output: 4 from
/// kWinogradF4MinSize rows and columns on (ResNet-18's 56x56, 28x28 and,
/// since session 10, 14x14 layers), else 2 (0 would mean no Winograd).
constexpr int64_t kWinogradF4MinSize = 14;
int64_t winograd_tile(int64_t OH, int64_t OW);
/// The geometry of a conv_winograd_shape conv's lowering (one image).
struct WinogradPlan {
  int64_t m, a;             // output tile m x m from an a x a input patch, a = m + 2
  int64_t th, tw;           // tile rows and columns (ceil(OH/m), ceil(OW/m))
  int64_t in_tasks, in_per; // input transform tasks over channels: count, channels per task
  // Fused (row_tasks > 0): row_tasks tasks of rows_per_task tile rows each
  // run the input transform, the GEMMs and the output transform of their
  // rows (kWinogradFusedMinTasks tasks or more); else three phases.
  int64_t row_tasks, rows_per_task;
  int64_t plane_h, plane_w; // each task's zero-padded input plane (floats)
  int64_t v_estride, m_estride; // phased: floats from V[e] to V[e+1] (C * T, or 16 more: never a multiple of 4 KB), M's
  int64_t scratch_floats;   // V [a*a, C, T], M [a*a, O, T] (fused: T rounded up to whole blocks), then the planes
};
/// Winograd convs with at least this many blocks of tile rows (of about two
/// vectors of tiles each: one GEMM panel) run fused, one task per block
/// (ResNet-18's 56x56 layers: 7 blocks of 2 tile rows, 28 tiles; measured
/// faster than blocks of one tile row, whose 14-column GEMMs run at lower
/// efficiency, and than the three phases).
constexpr int64_t kWinogradFusedMinTasks = 7;
WinogradPlan winograd_plan(const Graph &graph, const Node &node);

/// True for a conv2d the CPU code generator lowers as a direct vectorized
/// window loop (f32, groups > 1: depthwise and grouped convolutions; see
/// Cpu/ConvEmitter.cpp); it reads the input in place (no scratch: `bytes`
/// is set to 0).
bool conv_uses_direct(const Graph &graph, const Node &node, int64_t *bytes = nullptr);
/// The widest f32 vector the direct kernel and the conv GEMM panels use.
constexpr int64_t kConvDirectMaxLanes = 16;
/// How a CPU conv kernel splits `units` independent units (the direct
/// kernel's groups, im2col's (channel, kernel row) pairs) of `unit_work` each into
/// tasks: {tasks, units per task}, about kConvTaskWork per task, at most
/// kConvMaxTasks.
/// Static, so the split (and the result's bits) never depend on threads.
constexpr int64_t kConvTaskWork = 32768, kConvMaxTasks = 16;
std::array<int64_t, 2> conv_task_split(int64_t units, int64_t unit_work);
/// The direct kernel's split: conv_task_split over the conv's groups.
std::array<int64_t, 2> conv_direct_split(const Graph &graph, const Node &node);

/// True for a matmul the code generator lowers to the register-blocked GEMM
/// (f32, no transposes, both operands stored under `plan`).
bool matmul_uses_gemm(const Graph &graph, const LoweringPlan &plan, const Node &node);

/// For a matmul C = cast(A8, i32) @ cast(B8, i32) with A8, B8 u8 or i8, C
/// i32, no transposes, A8 [..., M, K] (rank >= 2), B8 a constant or a graph
/// input [K, N] (static, K and N > 0; a block's parameter, packed where
/// every call passes a constant: Cpu/GemmPanels.h): {A8, B8}; else nothing. (Whether the plan takes
/// it: matmul_uses_int8_gemm.)
std::optional<std::pair<ValueId, ValueId>> int8_gemm_operands(const Graph &graph, const Node &node);

/// True for a matmul the CPU code generator lowers to the integer GEMM
/// (PlanOptions::int8_gemm): int8_gemm_operands, the casts fused and A8
/// stored under `plan`.
bool matmul_uses_int8_gemm(const Graph &graph, const LoweringPlan &plan, const Node &node);

/// An exact f32 conv2d of 8-bit activations minus their zero point (an
/// imported ConvInteger/QLinearConv: Frontend/Onnx/OnnxQuantized.cpp):
/// conv2d(sub(cast(X8, f32), cast(Z8, f32)) or cast(X8, f32), W), exact, one
/// group, static, no bias, X8 u8 or i8 (Z8 a one-element value of its
/// dtype), W an f32 constant [O, C, KH, KW] of integers whose every output
/// channel spans at most 255 (w - w_zp of 8-bit weights: conv_int8_weight_ok).
/// The activation may also be a slice of input channels [c, c + C) of that
/// (a chunk of the importer's f32 exactness split): channel_offset c.
struct ConvInt8Operands {
  ValueId x = 0, zero_point = 0, weight = 0;
  bool has_zero_point = false;
  int64_t channel_offset = 0;
};
std::optional<ConvInt8Operands> conv_int8_operands(const Graph &graph, const Node &node);
/// W's values as conv_int8_operands needs them (|w| <= 255, integers, each
/// output channel's max - min <= 255).
bool conv_int8_weight_ok(const HostTensor &w);
/// True for a conv2d the CPU code generator lowers to the integer GEMM
/// (PlanOptions::int8_gemm): conv_int8_operands, the activation's sub and
/// cast fused (never computed), X8 (and Z8) stored. Cpu/ConvEmitter.h:
/// emit_conv_i8.
bool conv_uses_int8_gemm(const Graph &graph, const LoweringPlan &plan, const Node &node);
/// Its columns are padded to kConvInt8Panel pixels (the widest integer GEMM
/// panel); scratch: the byte im2col, its packed copy and the columns' sums (i32).
constexpr int64_t kConvInt8Panel = 32;
int64_t conv_int8_scratch_bytes(const Graph &graph, const Node &node);
/// Where the byte im2col of the whole image (Kp x OH*OW bytes, Kp = K
/// rounded up to 4) exceeds kConvInt8BlockBytes, the integer conv runs in
/// tasks of this many output rows, each its own im2col, packing and GEMM
/// (in L2; each block's columns padded to kConvInt8Panel on their own, so
/// the rows are chosen for the least padding, and blocks are used only where
/// they add at most 1/8 to the columns computed); 0: the whole image at once.
constexpr int64_t kConvInt8BlockBytes = 288 << 10;
int64_t conv_int8_block_rows(int64_t kp, int64_t oh, int64_t ow);

/// For a max_pool2d of cast(X8, f32), X8 u8 or i8 (a QDQ model's MaxPool,
/// whose Q/DQ pair ONNX Runtime drops): X8. With PlanOptions::int8_gemm
/// the cast, read by nothing else, is fused and X8 stored: the CPU's pool
/// kernel reads the bytes (Cpu/ConvEmitter.h: PoolInput).
std::optional<ValueId> max_pool_int8_source(const Graph &graph, const Node &node);

/// True for a node that runs as a GEMM kernel under `plan`: such a matmul,
/// or a conv_uses_gemm / conv_uses_direct conv2d whose input and weights are
/// stored (both take the plan's epilogues).
bool node_uses_gemm(const Graph &graph, const LoweringPlan &plan, const Node &node);

/// Ops that compute one output element from operand elements without inner
/// loops: they fuse into their consumers.
bool is_elemental_op(const std::string &op);
/// Reductions: producers fuse into them (each operand element is read once).
bool is_reduction_op(const std::string &op);

/// What the backend's kernels take beyond the common plan.
struct PlanOptions {
  /// The CPU's attention kernel reads q, k and v through row strides, so a
  /// chain of views (reshape, transpose, split, slice...) between a stored
  /// buffer and an attention operand stays fused (strided_view): no
  /// head-split transpose is materialized. A fused elementwise value at the
  /// chain's root (a bias add) is stored instead, usually as the epilogue
  /// of the GEMM before it.
  bool strided_attention_operands = false;
  /// An i32 matmul of 8-bit values widened by casts, B a constant or input [K, N]
  /// (int8_gemm_operands), runs the CPU's integer GEMM on the 8-bit values
  /// themselves: the two casts are fused (never computed), A's 8-bit value
  /// is stored (matmul_uses_int8_gemm).
  bool int8_gemm = false;
  /// Concat and split move no data when their slices are contiguous (static
  /// shapes, every dim before the axis 1): a concat's stored operands are
  /// computed straight into their slices of its result, and a split's
  /// stored results are its operand's slices (LoweringPlan::slot_offsets,
  /// `in_place`). Off for the GPU backends, whose emitters take one slot
  /// per value.
  bool in_place_concat = false;
  /// A view (reshape, unsqueeze, transpose, broadcast_to...) of stored
  /// values, or of such views, fuses into an elementwise consumer (or a
  /// broadcast_to) that reads each of its elements several times (a
  /// nearest upsampling: unsqueeze, broadcast_to, reshape per axis): each
  /// read is one load, where a stored copy is one more pass over the data.
  /// Off for the GPU backends, whose plan pass stores a matmul through the
  /// views after it instead (refine_gpu_plans).
  bool fuse_broadcast_views = false;
  /// A computed value (not only a view of stored values) read by a
  /// transpose that moves its last axis is stored, not fused into the
  /// transpose: computed along its rows (vectorized); the transpose then
  /// only moves stored values (by the CPU's tiled kernel, emit_transpose_tiles,
  /// where the transpose is stored). Fused, every element was computed
  /// alone, a row apart (a DynamicQuantizeLinear's arithmetic before an
  /// NCHW → NHWC transpose ran at a third of the speed). Only where the
  /// tiles apply (transpose_tile_axis).
  bool store_before_tiled_transposes = false;
  /// A backend's plan pass, run over the plans of the root graph and its
  /// subgraphs once they are made (plan_lowering_all; plan_lowering runs it
  /// on its one graph as a root). The GPU backends' is refine_gpu_plans
  /// (gpu_plan_options, Codegen/GpuModelCompiler.h). A function pointer:
  /// the neutral planner calls no backend code by name.
  void (*refine)(const Graph &root, LoweringPlans &plans) = nullptr;
};
/// The CPU's tiled transpose (KernelEmitter::emit_transpose_tiles) moves
/// kTransposeTile x kTransposeTile tiles.
inline constexpr int64_t kTransposeTile = 8;
/// When `node` is a transpose the CPU's tiled kernel can store — it moves
/// its operand's last axis, neither tile axis is statically below
/// kTransposeTile, and its dtype is stored as computed (not f16, bf16,
/// bool) — the result axis that reads the operand's last axis; else none.
std::optional<size_t> transpose_tile_axis(const Graph &g, const Node &node);

/// The CPU backend's options (CpuBackend, Cpu/ModelCompiler).
inline PlanOptions cpu_plan_options() {
  PlanOptions options;
  options.strided_attention_operands = true;
  options.int8_gemm = true;
  options.in_place_concat = true;
  options.store_before_tiled_transposes = true;
  options.fuse_broadcast_views = true;
  return options;
}

/// The plan of `graph`; with options.refine, refined as a root graph (its
/// inputs not known to be bound to constants: plan_lowering_all knows
/// each subgraph's call sites).
LoweringPlan plan_lowering(const Graph &graph, const PlanOptions &options = {});

/// A value that reads a stored buffer at an affine index: element idx of the
/// value is element offset + sum_d idx[d] * strides[d] of `base`'s buffer.
struct StridedView {
  ValueId base = 0;
  int64_t offset = 0;
  std::vector<int64_t> strides; // in elements, one per dim of the value
};
/// The strided view of v under `plan`: v itself when stored (row-major; its
/// dims past the first static), or a fused transpose, split, slice (static
/// extents) or copy-free reshape / squeeze / unsqueeze (numpy's rule: merged
/// dims must be one run of memory) of one; else nullopt.
std::optional<StridedView> strided_view(const Graph &graph, const LoweringPlan &plan, ValueId v);

/// The plans of `root` and of each of its subgraphs, then options.refine
/// over them.
LoweringPlans plan_lowering_all(const Graph &root, const PlanOptions &options = {});

/// Bytes of workspace a run of `graph` (decomposed, with its subgraphs)
/// needs at most, as a Dim over the symbolic dims: slots rounded up to 64
/// bytes, plus the largest callee's need (Dim::max: a max atom when two or
/// more needs are symbolic and none provably dominates).
/// With `plans` (plan_lowering_all), nothing is planned again.
Dim workspace_bound(const Graph &graph, const LoweringPlans *plans = nullptr);

/// "%3 temp slot 1", one line per value; for golden tests of fusion
/// decisions. A GEMM result with an epilogue reads "fused (GEMM epilogue ->
/// %7)", %7 being the stored value its kernel writes; a matmul result
/// stored through views "fused (stored through views -> %9)".
std::string describe_plan(const Graph &graph, const LoweringPlan &plan);

} // namespace maxc

namespace maxc::codegen {

// ---- which lowering each backend has for an op (checked for every op of
// the registry by test/unit/Codegen/OpLoweringTest.cpp) ----

/// True when `op` has an element formula (ElementalEmitter.cpp): every
/// elementwise, generator and collective op must have one.
bool has_element_formula(const std::string &op);
/// True when the elemental emitter can compute one element of `op`: an
/// element formula, a view's index remapping, a reduction or window loop.
bool has_elemental_lowering(const std::string &op);
/// How the CPU backend (KernelEmitter) lowers `op`: "elemental" (a loop nest
/// evaluating the elemental emitter), "matmul", "conv2d", "call",
/// "constant"; empty when it has none (composite ops are decomposed first).
std::string cpu_lowering(const std::string &op);
/// The kernel the GPU generator (GpuKernelEmitter) makes for `op`:
/// "elementwise", "reduction", "matmul", "conv2d", "attention" (kept whole
/// by the GPU backends' decompose options), or "call"/"constant" (no
/// kernel); empty when it has none.
std::string gpu_kernel_kind(const std::string &op);

} // namespace maxc::codegen
