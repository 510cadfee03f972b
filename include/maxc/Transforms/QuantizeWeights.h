// Weight-only quantization (`maxc compile --quantize-weights int8|int4`):
// every matmul whose B is a constant f32 matrix [K, N] (or [N, K] with
// transpose_b), and every linear with a constant weight, of K >= the block
// and at least kMinQuantizedElements weights, becomes matmul_nbits
// (maxc/Ops/MatmulNbits.h) on the weight quantized block by block along K:
// asymmetric (a scale and a zero point per block of 32, the block's range
// [min(0, lo), max(0, hi)] mapped onto 0..2^bits - 1: MatMulNBits' layout and
// ONNX Runtime's default; with `search`, each end of the range shrunk by up
// to 20 % where that lowers the block's squared error — on a trained
// decoder, int4 logits 1.47 % -> 1.32 % off f32, docs/PERFORMANCE.md), the
// f32 weight dropped. A bias of a linear is
// added after. A weight that reaches matmuls as an argument of subgraph
// calls (repeated layers: ONNX dedup, the JSON format's `repeat`) is
// quantized too when the body reads that input only as such weights and
// every call passes a constant there: the body's input becomes three (codes,
// scales, zero points) and each call passes its own weight quantized.
// Other matmuls (an A transposed, a batched B, a computed B) and other
// dtypes are left as they are.
#pragma once

#include "maxc/IR/Graph.h"

#include <memory>
#include <string>
#include <vector>

namespace maxc {

inline constexpr int64_t kMinQuantizedElements = 1024;

struct QuantizeWeightsOptions {
  int64_t bits = 4;     // 4 or 8
  int64_t block = 32;   // codes per scale along K
  bool symmetric = false;
  bool search = true;   // quantize_nbits' per-block range search (lower error than min/max)
};

/// One quantized weight: its constant, the node reading it, K and N, and
/// the relative error ||W - dequant(W)||_F / ||W||_F.
struct QuantizedLayer {
  std::string weight, node;
  int64_t k = 0, n = 0;
  double relative_error = 0;
};

/// `graph` with its matmuls on constant f32 weights quantized (subgraph
/// bodies too), or null when there is none. `layers` (optional) gets one
/// entry per weight quantized, in node order.
std::unique_ptr<Graph> quantize_weights(const Graph &graph, const QuantizeWeightsOptions &options,
                                        std::vector<QuantizedLayer> *layers = nullptr);

/// "int8" -> 8, "int4" -> 4; throws maxc::Error (InvalidArgument) otherwise.
int64_t quantize_weights_bits(const std::string &text);

} // namespace maxc
