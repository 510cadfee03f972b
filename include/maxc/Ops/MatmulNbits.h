// matmul_nbits: Y = A @ dequant(B)^T with B a block-quantized weight in the
// layout of ONNX Runtime's com.microsoft MatMulNBits (bits 4 or 8):
//
//   B            u8 [N, nb, block * bits / 8], nb = ceil(K / block): row n's
//                codes along K, packed low bits first (4 bits: element 2i in
//                byte i's low nibble, 2i + 1 in its high nibble)
//   scales       A's float dtype, N * nb elements ([N * nb] or [N, nb])
//   zero_points  optional u8, N * ceil(nb * bits / 8) elements: row n's nb
//                zero points packed like B's codes (each row starts on a
//                byte); default 2^(bits - 1)
//
//   w[n, k] = (code[n, k] - zp[n, k / block]) * scale[n, k / block]
//
// The layout helpers here are shared by the op's verifier and reference,
// the CPU kernel, the ONNX importer and the weight quantizer
// (Transforms/QuantizeWeights.h).
#pragma once

#include "maxc/IR/HostTensor.h"
#include "maxc/Tensor/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

inline constexpr const char *kMatmulNbitsOp = "matmul_nbits";

struct NbitsLayout {
  int64_t k = 0, n = 0, bits = 4, block = 32;
  int64_t blocks() const { return (k + block - 1) / block; }             // nb, per row of B
  int64_t blob_bytes() const { return block * bits / 8; }                // bytes of one block's codes
  int64_t row_bytes() const { return blocks() * blob_bytes(); }          // bytes of one row of B
  int64_t zp_row_bytes() const { return (blocks() * bits + 7) / 8; }     // bytes of one row's zero points
  int64_t default_zero_point() const { return int64_t(1) << (bits - 1); }
  /// Code of element (n, k) in B's bytes.
  int64_t code(const uint8_t *b, int64_t row, int64_t col) const {
    const uint8_t *r = b + row * row_bytes() + (col / block) * blob_bytes();
    int64_t i = col % block;
    return bits == 8 ? r[i] : (r[i / 2] >> (4 * (i % 2))) & 15;
  }
  /// Zero point of block `blk` of row `row` (zp null: the default).
  int64_t zero_point(const uint8_t *zp, int64_t row, int64_t blk) const {
    if (!zp)
      return default_zero_point();
    const uint8_t *r = zp + row * zp_row_bytes();
    return bits == 8 ? r[blk] : (r[blk / 2] >> (4 * (blk % 2))) & 15;
  }
};

/// An empty string when bits, block and K, N are ones matmul_nbits takes
/// (bits 4 or 8, block a power of two >= 16, K and N >= 1), else why not.
std::string nbits_layout_problem(const NbitsLayout &layout);

/// A weight quantized for matmul_nbits.
struct NbitsWeight {
  HostTensor b;           // u8 [N, nb, blob]
  HostTensor scales;      // f32 [N * nb]
  HostTensor zero_points; // u8 [N * zp_row_bytes], invalid when symmetric
};

/// Quantizes w (f32, [N, K] row-major: w_nk, i.e. B^T) block by block along
/// K. Asymmetric (`symmetric` false): scale = (max - min) / (2^bits - 1)
/// over the block with 0 inside [min, max], zero point = round(-min /
/// scale); symmetric: scale = max|w| / (2^(bits-1) - 1)... see the .cpp.
/// `search`: per block, the range shrunk at either end (by 5-20 %) where
/// that gives a smaller squared error (outliers clipped, the other weights
/// on a finer grid), the plain range otherwise.
NbitsWeight quantize_nbits(const float *w, const NbitsLayout &layout, bool symmetric, bool search = false);

/// w[n, k] dequantized (f32, [N, K]).
std::vector<float> dequantize_nbits(const NbitsLayout &layout, const uint8_t *b, const float *scales,
                                    const uint8_t *zero_points);

namespace ops {
/// a @ dequant(b)^T, b a block-quantized weight (the layout above;
/// zero_points absent: 2^(bits-1)).
Tensor matmul_nbits(const Tensor &a, const Tensor &b, const Tensor &scales, const std::optional<Tensor> &zero_points,
                    int64_t k, int64_t n, int64_t bits, int64_t block_size);
/// matmul_nbits spelled in primitives (unpack, subtract, scale, matmul):
/// what decompose() rewrites it into (`in`: its operands, `attrs`: its attributes).
Tensor matmul_nbits_primitives(const std::vector<Tensor> &in, const Attrs &attrs);
} // namespace ops

} // namespace maxc
