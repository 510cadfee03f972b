// matmul_nbits (maxc/Ops/MatmulNbits.h): a matmul whose B is a block-
// quantized weight in MatMulNBits' layout. A composite: decompose() rewrites
// it into primitives (the codes unpacked with integer div/mod, the zero
// point subtracted, the scales broadcast, a matmul) for the backends without
// a kernel; the CPU keeps f32 ones whole (DecomposeOptions::keep_matmul_nbits,
// Codegen/Cpu/NbitsGemvEmitter).
//
// Reference semantics: w dequantized in double, each output element the sum
// over k ascending in double, rounded once.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <algorithm>
#include <cmath>

namespace maxc {
using namespace ophelpers;

std::string nbits_layout_problem(const NbitsLayout &l) {
  if (l.bits != 4 && l.bits != 8)
    return "bits " + std::to_string(l.bits) + " is not supported (4 or 8)";
  if (l.block < 16 || (l.block & (l.block - 1)) != 0)
    return "block_size " + std::to_string(l.block) + " must be a power of two >= 16";
  if (l.k < 1 || l.n < 1)
    return "K " + std::to_string(l.k) + " and N " + std::to_string(l.n) + " must be >= 1";
  return "";
}

namespace {
// quantize_nbits' search: the block's range shrunk at either end by these
// factors (the plain range first).
constexpr float kShrinks[] = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f};
} // namespace

NbitsWeight quantize_nbits(const float *w, const NbitsLayout &l, bool symmetric, bool search) {
  int64_t nb = l.blocks(), qmax = (int64_t(1) << l.bits) - 1;
  NbitsWeight q;
  q.b = HostTensor(DType::u8, {l.n, nb, l.blob_bytes()});
  q.scales = HostTensor(DType::f32, {l.n * nb});
  std::fill(q.b.data_as<uint8_t>(), q.b.data_as<uint8_t>() + q.b.numel(), uint8_t(0));
  if (!symmetric) {
    q.zero_points = HostTensor(DType::u8, {l.n * l.zp_row_bytes()});
    std::fill(q.zero_points.data_as<uint8_t>(), q.zero_points.data_as<uint8_t>() + q.zero_points.numel(), uint8_t(0));
  }
  uint8_t *b = q.b.data_as<uint8_t>();
  float *scales = q.scales.data_as<float>();
  auto put = [&](uint8_t *row, int64_t i, int64_t v) { // code i of a packed run
    if (l.bits == 8)
      row[i] = static_cast<uint8_t>(v);
    else
      row[i / 2] = static_cast<uint8_t>(row[i / 2] | (v << (4 * (i % 2))));
  };
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t blk = 0; blk < nb; ++blk) {
      int64_t k0 = blk * l.block, k1 = std::min(l.k, k0 + l.block);
      float lo = 0, hi = 0, amax = 0;
      for (int64_t k = k0; k < k1; ++k) {
        float v = w[n * l.k + k];
        lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
      }
      float scale;
      int64_t zp;
      // The block's squared error for a scale and zero point (codes rounded and clamped).
      auto sse = [&](float s, int64_t z) {
        double e = 0;
        for (int64_t k = k0; k < k1; ++k) {
          double v = w[n * l.k + k], c = std::clamp(std::nearbyint(v / s) + static_cast<double>(z), 0.0, double(qmax));
          double d = (c - static_cast<double>(z)) * s - v;
          e += d * d;
        }
        return e;
      };
      if (symmetric) {
        // codes - 2^(bits-1) in [-(2^(bits-1) - 1), 2^(bits-1) - 1]
        zp = l.default_zero_point();
        scale = amax / static_cast<float>(zp - 1);
        if (search && scale > 0 && std::isfinite(scale)) {
          double best = sse(scale, zp);
          for (float shrink : kShrinks) {
            float s = amax * shrink / static_cast<float>(zp - 1);
            double e = sse(s, zp);
            if (e < best)
              best = e, scale = s;
          }
        }
      } else {
        scale = (hi - lo) / static_cast<float>(qmax);
        zp = scale > 0 ? std::clamp<int64_t>(std::llround(-lo / scale), 0, qmax) : 0;
        if (search && scale > 0 && std::isfinite(scale)) {
          double best = sse(scale, zp);
          for (float sl : kShrinks)
            for (float sh : kShrinks) {
              float s = (hi * sh - lo * sl) / static_cast<float>(qmax);
              if (!(s > 0))
                continue;
              int64_t z = std::clamp<int64_t>(std::llround(-lo * sl / s), 0, qmax);
              double e = sse(s, z);
              if (e < best)
                best = e, scale = s, zp = z;
            }
        }
      }
      if (!(scale > 0) || !std::isfinite(scale))
        scale = 1; // an all-zero block (or non-finite weights: stored as they round)
      scales[n * nb + blk] = scale;
      if (!symmetric)
        put(q.zero_points.data_as<uint8_t>() + n * l.zp_row_bytes(), blk, zp);
      uint8_t *blob = b + n * l.row_bytes() + blk * l.blob_bytes();
      for (int64_t k = k0; k < k1; ++k) {
        double c = std::nearbyint(static_cast<double>(w[n * l.k + k]) / scale) + static_cast<double>(zp);
        put(blob, k - k0, static_cast<int64_t>(std::clamp(std::isnan(c) ? double(zp) : c, 0.0, double(qmax))));
      }
      for (int64_t k = k1; k < k0 + l.block; ++k) // codes past K: the zero point (they weigh nothing)
        put(blob, k - k0, zp);
    }
  return q;
}

std::vector<float> dequantize_nbits(const NbitsLayout &l, const uint8_t *b, const float *scales,
                                    const uint8_t *zero_points) {
  std::vector<float> w(static_cast<size_t>(l.n * l.k));
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t k = 0; k < l.k; ++k) {
      int64_t blk = k / l.block;
      w[n * l.k + k] = static_cast<float>(l.code(b, n, k) - l.zero_point(zero_points, n, blk)) *
                       scales[n * l.blocks() + blk];
    }
  return w;
}

namespace {

NbitsLayout layout_of(const Attrs &a) {
  return NbitsLayout{a.get_int("K"), a.get_int("N"), a.get_int("bits"), a.get_int("block_size")};
}

bool static_numel(const TensorType &t, int64_t want) {
  int64_t numel = 1;
  for (const Dim &d : t.shape) {
    if (!d.is_static())
      return false;
    numel *= d.value();
  }
  return numel == want && t.rank() >= 1 && t.rank() <= 2;
}

OpDef matmul_nbits_op() {
  OpDef def;
  def.name = kMatmulNbitsOp;
  def.traits = OpTrait::composite;
  def.summary = "a @ dequant(b)^T with b a block-quantized weight (ONNX Runtime's MatMulNBits layout: "
                "w = (code - zero_point) * scale per block of K)";
  def.min_operands = 3;
  def.max_operands = 4;
  def.attrs = {{"K", AttrKind::integer, AttrValue(int64_t(0)), "the contraction size (a's last dim)"},
               {"N", AttrKind::integer, AttrValue(int64_t(0)), "the output features (b's rows)"},
               {"bits", AttrKind::integer, AttrValue(int64_t(4)), "bits per code: 4 or 8"},
               {"block_size", AttrKind::integer, AttrValue(int64_t(32)),
                "codes per scale along K: a power of two >= 16"}};
  def.infer = [](const InferContext &c) {
    const std::string op = kMatmulNbitsOp;
    NbitsLayout l = layout_of(c.attrs);
    if (std::string why = nbits_layout_problem(l); !why.empty())
      fail_attr(op, why);
    const TensorType &a = c.operands[0], &b = c.operands[1], &s = c.operands[2];
    require_float(op, a, "a");
    require_min_rank(op, a, 1, "a");
    require_same_device(op, c.operands);
    if (a.shape.back() != Dim(l.k))
      fail_shape(op, "a " + a.to_string() + " must have K = " + std::to_string(l.k) + " as its last dim");
    require_dtype(op, b, DType::u8, "b");
    Shape want{Dim(l.n), Dim(l.blocks()), Dim(l.blob_bytes())};
    if (b.shape != want)
      fail_shape(op, "b " + b.to_string() + " must be [N, ceil(K / block_size), block_size * bits / 8] = " +
                         shape_to_string(want));
    if (s.dtype != a.dtype)
      fail_dtype(op, "scales " + s.to_string() + " must have a's dtype " + std::string(dtype_name(a.dtype)));
    if (!static_numel(s, l.n * l.blocks()))
      fail_shape(op, "scales " + s.to_string() + " must hold N * ceil(K / block_size) = " +
                         std::to_string(l.n * l.blocks()) + " elements ([N * nb] or [N, nb])");
    if (c.operands.size() > 3) {
      const TensorType &z = c.operands[3];
      require_dtype(op, z, DType::u8, "zero_points");
      if (!static_numel(z, l.n * l.zp_row_bytes()))
        fail_shape(op, "zero_points " + z.to_string() + " must hold N * ceil(nb * bits / 8) = " +
                           std::to_string(l.n * l.zp_row_bytes()) + " packed bytes");
    }
    Shape out(a.shape.begin(), a.shape.end() - 1);
    out.push_back(Dim(l.n));
    return std::vector<TensorType>{TensorType(a.dtype, out, a.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    NbitsLayout l = layout_of(c.attrs);
    const HostTensor &a = c.operands[0], &s = c.operands[2];
    const uint8_t *b = c.operands[1].data_as<uint8_t>();
    const uint8_t *zp = c.operands.size() > 3 ? c.operands[3].data_as<uint8_t>() : nullptr;
    HostTensor out = c.make_result();
    std::vector<double> w(static_cast<size_t>(l.n * l.k));
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t k = 0; k < l.k; ++k) {
        int64_t blk = k / l.block;
        w[n * l.k + k] = static_cast<double>(l.code(b, n, k) - l.zero_point(zp, n, blk)) * s.get_f64(n * l.blocks() + blk);
      }
    int64_t rows = a.numel() / l.k;
    std::vector<double> av = a.to_f64();
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < l.n; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < l.k; ++k)
          acc += av[m * l.k + k] * w[n * l.k + k];
        out.set_f64(m * l.n + n, acc);
      }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_quantized_ops(OpRegistry &r) { r.add(matmul_nbits_op()); }

namespace ops {

Tensor matmul_nbits(const Tensor &a, const Tensor &b, const Tensor &scales, const std::optional<Tensor> &zero_points,
                    int64_t k, int64_t n, int64_t bits, int64_t block_size) {
  std::vector<Tensor> operands{a, b, scales};
  if (zero_points)
    operands.push_back(*zero_points);
  return record_op(kMatmulNbitsOp, operands, {{"K", k}, {"N", n}, {"bits", bits}, {"block_size", block_size}});
}

/// The primitives decompose() rewrites matmul_nbits into.
Tensor matmul_nbits_primitives(const std::vector<Tensor> &in, const Attrs &attrs) {
  NbitsLayout l = layout_of(attrs);
  int64_t nb = l.blocks();
  DType ft = in[0].dtype();
  // Codes [N, nb, blob] as [N, nb, block] (i32): 4 bits split into the low
  // and high nibbles, interleaved.
  auto unpack = [&](const Tensor &bytes, const Shape &shape) { // bytes [..., m] u8 -> [..., m * 8 / bits] i32
    Tensor q = ops::cast(bytes, DType::i32);
    if (l.bits == 8)
      return q;
    Tensor sixteen = ops::full(16, DType::i32);
    int64_t axis = q.rank();
    Tensor lo = ops::unsqueeze(ops::mod(q, sixteen), {axis}), hi = ops::unsqueeze(ops::div(q, sixteen), {axis});
    return ops::reshape(ops::concat({lo, hi}, axis), shape);
  };
  Tensor codes = ops::cast(unpack(in[1], {Dim(l.n), Dim(nb), Dim(l.block)}), ft);
  Tensor zp = ops::full(static_cast<double>(l.default_zero_point()), ft);
  if (in.size() > 3) {
    Tensor z = unpack(ops::reshape(in[3], {Dim(l.n), Dim(l.zp_row_bytes())}),
                      {Dim(l.n), Dim(l.zp_row_bytes() * 8 / l.bits)});
    zp = ops::cast(ops::unsqueeze(ops::slice(z, {0, 0}, {l.n, nb}), {2}), ft);
  }
  Tensor scales = ops::reshape(in[2], {Dim(l.n), Dim(nb), Dim(1)});
  Tensor w = ops::reshape((codes - zp) * scales, {Dim(l.n), Dim(nb * l.block)});
  if (nb * l.block != l.k)
    w = ops::slice(w, {0, 0}, {l.n, l.k});
  Tensor a = in[0];
  bool vector = a.rank() == 1;
  if (vector)
    a = ops::unsqueeze(a, {0});
  Tensor y = ops::matmul(a, ops::transpose(w, {1, 0}));
  return vector ? ops::squeeze(y, {0}) : y;
}

} // namespace ops
} // namespace maxc
