// Decompose: rewrites composite ops into the primitives the code generators
// lower (softmax → max, sub, exp, sum, div; layer_norm → mean, ...; linear →
// matmul + add; embedding → gather; global_avg_pool2d → mean). f16/bf16
// normalizations compute in f32 and cast back, as the reference does in
// higher precision. Subgraphs are decomposed too, keeping their names, so
// dedup survives; their parameters bound to constants at every call site get
// the compile-time weight layout of root constants (MatmulLayout.h). A
// batch_norm of a constant-weight conv2d folds into the conv's weights
// (FoldBatchNorm.h).
#pragma once

#include "maxc/IR/Graph.h"

#include <memory>

namespace maxc {

/// What a backend lowers whole instead of getting it decomposed.
struct DecomposeOptions {
  /// Keep the rowwise composites (softmax and log_softmax over the last
  /// axis, layer_norm, rms_norm) of f32 values whole: the backend computes
  /// each as one row kernel (the CPU: Codegen/Cpu/NormEmitter). Others, and
  /// every other dtype, are decomposed as usual.
  bool keep_rowwise = false;
  /// Recognize scaled dot-product attention (Transforms/FuseAttention.h)
  /// and keep `attention` nodes (f32, static head dims) whole: the backend
  /// lowers them as one kernel (the CPU: Codegen/Cpu/AttentionEmitter).
  bool fuse_attention = false;
  /// With fuse_attention: f16 and bf16 attention too (the GPU's kernel
  /// widens to f32; the CPU's is f32 only).
  bool attention_low_precision = false;
  /// With fuse_attention: grouped-query attention (k and v repeated over
  /// groups of query heads: HF's repeat_kv, expand + reshape) read in place
  /// by one attention node with kv_groups > 1 (the CPU's kernel takes it).
  bool attention_kv_groups = false;
  /// Precision policy: f16 and bf16 computed in f32 (PromotePrecision.h),
  /// for a backend whose fast kernels are f32 only (the CPU).
  bool promote_low_precision = false;
  /// Keep `recurrence` nodes (LSTM/GRU/RNN directions, maxc/Ops/Recurrence.h)
  /// of f32 values whole: the backend runs each as one kernel over the
  /// sequence (the CPU: Codegen/Cpu/RecurrenceEmitter), of any length.
  /// Otherwise they are unrolled, which needs a static length.
  bool keep_recurrence = false;
  /// Keep `matmul_nbits` nodes (weight-only quantized matmuls,
  /// maxc/Ops/MatmulNbits.h) of f32 values whole: the backend reads the
  /// packed codes as they are (the CPU: Codegen/Cpu/NbitsGemvEmitter).
  bool keep_matmul_nbits = false;
  /// Keep `top_k` nodes (maxc/Ops/TopK.h) of f32 values whole: the backend
  /// selects each row's k first itself (the CPU: its runtime), at any row
  /// length; otherwise they become the ranking composition.
  bool keep_top_k = false;
  /// Dilated 3x3 convs as undilated ones over a batch of subsampled images
  /// (Transforms/DilatedConvAsBatch.h), applied after batch norms fold:
  /// for a backend whose undilated 3x3 convs take a faster kernel (the
  /// CPU's Winograd).
  bool dilated_conv_as_batch = false;
};

std::unique_ptr<Graph> decompose(const Graph &graph, const DecomposeOptions &options = {});

/// True for ops decompose() rewrites (code generators never see them, except
/// the rowwise ones a backend asks to keep, see DecomposeOptions).
bool is_composite_op(const std::string &op);

/// True for a node that DecomposeOptions::keep_rowwise keeps whole.
bool keeps_row_kernel(const Graph &graph, const Node &node);
/// True for an attention node that DecomposeOptions::fuse_attention keeps.
bool keeps_attention(const Graph &graph, const Node &node, bool low_precision = false);
/// True for a recurrence node that DecomposeOptions::keep_recurrence keeps (f32).
bool keeps_recurrence(const Graph &graph, const Node &node);
/// True for a matmul_nbits node that DecomposeOptions::keep_matmul_nbits keeps (f32).
bool keeps_matmul_nbits(const Graph &graph, const Node &node);
/// True for a top_k node that DecomposeOptions::keep_top_k keeps (f32).
bool keeps_top_k(const Graph &graph, const Node &node);

} // namespace maxc
