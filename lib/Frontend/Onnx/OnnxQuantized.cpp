// ONNX quantized ops → maxc ops, with ONNX's (and ONNX Runtime's) arithmetic:
//
//   QuantizeLinear      y = saturate(round_half_even(x / scale) + zp), in f32
//   DequantizeLinear    y = f32(int32(x) - int32(zp)) * scale
//   DynamicQuantizeLinear  lo = min(0, min x), hi = max(0, max x) (NaNs skipped),
//                       scale = hi == lo ? 1 : (hi - lo) / 255 (ONNX Runtime's
//                       rule for an all-zero input), zp = round(clip(-lo /
//                       scale, 0, 255)), y = QuantizeLinear(x, scale, zp)
//   MatMulInteger       (int32(a) - a_zp) @ (int32(b) - b_zp), an i32 matmul;
//                       with b an 8-bit initializer: int32(a) @ int32(b)
//                       - b_zp * rowsum(a) - a_zp * colsum(b - b_zp), b kept
//                       in 8 bits (the CPU's integer GEMM: integer_gemm below)
//   ConvInteger         conv(x - x_zp, w - w_zp), an i32 conv (exact in f32, below)
//   QLinearMatMul/Conv  the integer accumulator (plus the int32 bias) as f32
//                       times (x_scale * w_scale) / y_scale, then saturated
//                       like QuantizeLinear (ONNX Runtime's requantization)
//
// saturate clamps to the zero point's dtype (u8 0..255, i8 -128..127) and
// round is maxc's round (half to even). Zero points default to 0 (u8 where
// nothing names the dtype). Scales and zero points are per tensor (a scalar
// or a one-element tensor) or per axis (a 1-D tensor along `axis`, by
// default 1; the rows of a matmul's a, the columns of its b, the output
// channels of a conv's weight).
//
// Integer products in f32 (issue 25). Apart from MatMulInteger's known
// 8-bit weights (the integer GEMM), the products are f32 compositions (the
// CPU plan runs the exact convs of shifted 8-bit values below on the
// integer GEMM too: LoweringPlan.h, conv_uses_int8_gemm); f32 runs through
// the fast float kernels elsewhere and is exact here: the
// operands are integers (8-bit values minus zero points, |x| <= 255), and
// f32 holds every integer below 2^24, so when the magnitudes of all the
// terms of a sum add up to less than 2^24, every partial sum is such an
// integer and the f32 sum is exact in any order (GEMM panels, FMA, threads).
// With the weights known at import (initializers, the usual case) that
// bound is max|x| * sum |w - w_zp| over one output's reduction (K =
// C/group * kh * kw for a conv, K for a matmul), per output channel or
// column; unknown weights count 255 per element. ConvInteger, QLinearConv
// and MatMulInteger therefore split the reduction into the fewest greedy
// chunks of input channels (matmul: of K) that each stay under the bound,
// run each chunk in f32, convert it to i32 (exact) and add the chunks in
// i32: bit-identical to the integer result (isnet_quint8: 102 of its 119
// convs in one chunk, 15 in two, 2 in four). The convs are marked `exact`, so
// no lowering that rounds intermediates (Winograd) takes them.
//
// Where no chunking can work (one input channel's kernel alone reaches the
// bound, or a grouped conv that needs more than one chunk) the conv runs in
// f64 as before: every partial sum of K products of magnitude at most
// 255 * 255 is an integer below 2^53 for K < 2^37, exact in any order. The
// result is the ONNX int32 result bit for bit (|sum| < 2^31 for K < 33025;
// ONNX's int32 accumulator would wrap beyond that, the cast saturates).
#include "OnnxOps.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace maxc::onnx_import {
namespace {

[[noreturn]] void bad(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

Tensor as(const Tensor &x, DType dtype) { return x.dtype() == dtype ? x : ops::cast(x, dtype); }

/// The saturation range of a quantized dtype.
struct QRange {
  double lo, hi;
};

QRange qrange(DType dtype, const OnnxNode &node) {
  if (dtype == DType::u8)
    return {0, 255};
  if (dtype == DType::i8)
    return {-128, 127};
  throw Error(ErrorCode::OnnxUnsupportedType, node.op() + " to " + std::string(dtype_name(dtype)) +
                                                  " is not supported (maxc quantizes to u8 and i8)");
}

void require_8bit(const Tensor &t, const OnnxNode &node, const std::string &what) {
  if (t.dtype() != DType::u8 && t.dtype() != DType::i8)
    throw Error(ErrorCode::OnnxUnsupportedType, node.op() + "'s " + what + " is " +
                                                    std::string(dtype_name(t.dtype())) +
                                                    " (maxc supports u8 and i8)");
}

void no_blocks(const OnnxNode &node) {
  if (node.attr_int("block_size", 0) != 0)
    bad(node.op() + " with block_size (blocked quantization) is not supported");
}

/// A scale or zero point shaped to broadcast against a rank-`rank` tensor
/// along `axis`: a scalar or one-element tensor as a scalar; a 1-D tensor
/// as [n, 1, ...] (axis first, ones after).
Tensor along_axis(const Tensor &t, int64_t rank, int64_t axis, const OnnxNode &node, const std::string &what) {
  if (t.rank() == 0)
    return t;
  if (t.rank() != 1)
    bad(node.op() + "'s " + what + " must be a scalar or 1-D (blocked quantization is not supported)");
  const Dim &n = t.shape()[0];
  if (n.is_static() && n.value() == 1)
    return ops::reshape(t, {});
  if (axis < -rank || axis >= rank)
    bad(node.op() + " axis " + std::to_string(axis) + " is out of range for a rank-" + std::to_string(rank) +
        " input");
  if (axis < 0)
    axis += rank;
  Shape s{n};
  for (int64_t i = axis + 1; i < rank; ++i)
    s.push_back(Dim(1));
  return s.size() == 1 ? t : ops::reshape(t, s);
}

/// clamp(round_half_even(v) + zp) in f32, as `dtype` (u8 or i8).
Tensor saturate(const Tensor &v, const std::optional<Tensor> &zp, DType dtype, const OnnxNode &node) {
  QRange r = qrange(dtype, node);
  Tensor q = ops::round(v);
  if (zp)
    q = ops::add(q, as(*zp, DType::f32));
  q = ops::minimum(ops::maximum(q, ops::scalar(r.lo, DType::f32)), ops::scalar(r.hi, DType::f32));
  return ops::cast(q, dtype);
}

/// The dtype a QuantizeLinear makes: its zero point's, else output_dtype
/// (opset 21), else u8.
DType quantized_dtype(const OnnxNode &node, const std::optional<Tensor> &zp) {
  if (zp)
    return zp->dtype();
  if (int64_t code = node.attr_int("output_dtype", 0)) {
    std::optional<DType> d = dtype_from_onnx_type(static_cast<int32_t>(code));
    if (!d)
      throw Error(ErrorCode::OnnxUnsupportedType, "QuantizeLinear output_dtype " + std::to_string(code) +
                                                      " is not supported (maxc quantizes to u8 and i8)");
    return *d;
  }
  return DType::u8;
}

std::optional<Tensor> optional_in(const OnnxNode &node, size_t i) {
  if (node.has(i))
    return node.in(i);
  return std::nullopt;
}

/// Input i's one element when it is known at import.
std::optional<double> known_one(const OnnxNode &node, size_t i) {
  if (!node.has(i) || node.val(i).kind != Val::Kind::known)
    return std::nullopt;
  HostTensor t = node.known(i);
  if (t.numel() != 1)
    return std::nullopt;
  return t.get_f64(0);
}

Tensor quantize(const Tensor &x, const Tensor &scale, const std::optional<Tensor> &zp, DType dtype,
                const OnnxNode &node) {
  return saturate(ops::div(as(x, DType::f32), as(scale, DType::f32)), zp, dtype, node);
}

Tensor quantize_linear(const OnnxNode &node) {
  no_blocks(node);
  Tensor x = node.in(0);
  int64_t axis = node.attr_int("axis", 1);
  Tensor scale = along_axis(node.in(1), x.rank(), axis, node, "y_scale");
  std::optional<Tensor> zp = optional_in(node, 2);
  DType dtype = quantized_dtype(node, zp);
  if (std::optional<double> z = known_one(node, 2))
    zp = ops::scalar(*z, DType::f32); // a literal, not a value computed at run time
  else if (zp)
    zp = along_axis(*zp, x.rank(), axis, node, "y_zero_point");
  Tensor y = quantize(x, scale, zp, dtype, node);
  return y;
}

Tensor dequantize_linear(const OnnxNode &node) {
  no_blocks(node);
  Tensor x = node.in(0);
  if (x.dtype() != DType::u8 && x.dtype() != DType::i8 && x.dtype() != DType::i32)
    throw Error(ErrorCode::OnnxUnsupportedType, "DequantizeLinear of " + std::string(dtype_name(x.dtype())) +
                                                    " is not supported (maxc supports u8, i8 and i32)");
  int64_t axis = node.attr_int("axis", 1);
  Tensor scale = along_axis(node.in(1), x.rank(), axis, node, "x_scale");
  Tensor v = as(x, DType::i32);
  if (node.has(2))
    v = ops::sub(v, as(along_axis(node.in(2), x.rank(), axis, node, "x_zero_point"), DType::i32));
  Tensor y = ops::mul(ops::cast(v, DType::f32), as(scale, DType::f32));
  return as(y, is_float(scale.dtype()) ? scale.dtype() : DType::f32); // opset 19: the scale's dtype
}

std::vector<Tensor> dynamic_quantize_linear(const OnnxNode &node) {
  Tensor x = as(node.in(0), DType::f32);
  Tensor zero = ops::scalar(0, DType::f32);
  // NaN elements do not take part in the range (ONNX Runtime's min/max skip
  // them; they quantize to 0): one NaN would otherwise make the scale NaN and
  // every element of the tensor 0. min(0, ...) and max(0, ...) make a NaN
  // read as 0 the same as skipping it.
  Tensor ranged = ops::where(ops::not_equal(x, x), zero, x);
  Tensor lo = ops::minimum(ops::min(ranged, {}), zero), hi = ops::maximum(ops::max(ranged, {}), zero);
  Tensor scale = ops::where(ops::equal(hi, lo), ops::scalar(1, DType::f32),
                            ops::div(ops::sub(hi, lo), ops::scalar(255, DType::f32)));
  Tensor zp = saturate(ops::sub(zero, ops::div(lo, scale)), std::nullopt, DType::u8, node);
  return {quantize(x, scale, zp, DType::u8, node), scale, zp};
}

/// f32 holds every integer of magnitude below this exactly.
constexpr double kExactF32 = 16777216.0; // 2^24

/// The largest |a - zp| for an 8-bit a (dtype `a`) and a zero point of the
/// given dtype (none: 0); nullopt for a zero point that is not 8-bit.
std::optional<double> max_shifted(DType a, const std::optional<Tensor> &zp) {
  auto range = [](DType d) { return d == DType::u8 ? QRange{0, 255} : QRange{-128, 127}; };
  if (zp && zp->dtype() != DType::u8 && zp->dtype() != DType::i8)
    return std::nullopt;
  QRange ra = range(a), rz = zp ? range(zp->dtype()) : QRange{0, 0};
  return std::max(std::abs(ra.hi - rz.lo), std::abs(rz.hi - ra.lo));
}

/// w - zp (none: 0) as f32, zp per tensor (one element) or one per index
/// of w's dim `axis`; nullopt for another zero point shape.
std::optional<HostTensor> shifted_values(const HostTensor &wv, const HostTensor *zv, int64_t axis) {
  const std::vector<int64_t> &shape = wv.shape();
  if (axis < 0)
    axis += static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return std::nullopt;
  int64_t dim = shape[static_cast<size_t>(axis)], inner = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i)
    inner *= shape[i];
  if (zv && zv->numel() != 1 && (zv->numel() != dim || zv->shape().size() != 1))
    return std::nullopt;
  HostTensor out(DType::f32, shape);
  float *dst = out.data_as<float>();
  for (int64_t i = 0, n = wv.numel(); i < n; ++i) {
    double z = !zv ? 0 : zv->numel() == 1 ? zv->get_f64(0) : zv->get_f64(i / inner % dim);
    dst[i] = static_cast<float>(wv.get_f64(i) - z); // |.| <= 255: exact
  }
  return out;
}

/// shifted_values of input `w` and input `zp` (absent: 0), when both are
/// known at import; nullopt otherwise (traced operands).
std::optional<HostTensor> known_shifted(const OnnxNode &node, size_t w, size_t zp, int64_t axis) {
  if (!node.has(w) || node.val(w).kind != Val::Kind::known || (node.has(zp) && node.val(zp).kind != Val::Kind::known))
    return std::nullopt;
  std::optional<HostTensor> zv;
  if (node.has(zp))
    zv = node.known(zp);
  return shifted_values(node.known(w), zv ? &*zv : nullptr, axis);
}

/// Ranges [c0, c1) of the reduction [0, n) such that, for every output j,
/// the costs cost(j, c) of a range add up to less than kExactF32: greedy,
/// the fewest ranges. Empty when one c alone reaches the bound.
std::vector<std::pair<int64_t, int64_t>> exact_chunks(int64_t n, int64_t outputs,
                                                      const std::function<double(int64_t, int64_t)> &cost) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::vector<double> run(static_cast<size_t>(outputs), 0.0), here(static_cast<size_t>(outputs));
  auto fits = [&](int64_t c) {
    for (int64_t j = 0; j < outputs; ++j)
      if (run[j] + (here[j] = cost(j, c)) >= kExactF32)
        return false;
    return true;
  };
  int64_t c0 = 0;
  for (int64_t c = 0; c < n; ++c) {
    if (!fits(c)) {
      if (c == c0)
        return {};
      chunks.push_back({c0, c});
      c0 = c;
      std::fill(run.begin(), run.end(), 0.0);
      if (!fits(c))
        return {};
    }
    for (int64_t j = 0; j < outputs; ++j)
      run[j] += here[j];
  }
  chunks.push_back({c0, n});
  return chunks;
}

/// Dims [c0, c1) of `axis` of a host tensor.
HostTensor slice_host(const HostTensor &t, int64_t axis, int64_t c0, int64_t c1) {
  std::vector<int64_t> shape = t.shape();
  int64_t dim = shape[axis], inner = 1, outer = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i < axis)
      outer *= shape[i];
    else if (i > axis)
      inner *= shape[i];
  shape[axis] = c1 - c0;
  HostTensor out(t.dtype(), shape);
  const float *src = t.data_as<float>();
  float *dst = out.data_as<float>();
  for (int64_t o = 0; o < outer; ++o)
    std::copy(src + (o * dim + c0) * inner, src + (o * dim + c1) * inner, dst + o * (c1 - c0) * inner);
  return out;
}

/// A chunk's f32 weight: the known values (a constant named after input
/// `w`) or the traced tensor, sliced to [c0, c1) along `axis` unless whole.
Tensor weight_chunk(const OnnxNode &node, size_t w, const std::optional<HostTensor> &known, const Tensor &traced,
                    int64_t axis, std::pair<int64_t, int64_t> chunk, bool whole) {
  std::string name = node.input_name(w) + ".f32";
  if (known)
    return whole ? Tensor::from_host(*known, name)
                 : Tensor::from_host(slice_host(*known, axis, chunk.first, chunk.second),
                                     name + "." + std::to_string(chunk.first));
  return whole ? traced : ops::slice(traced, {chunk.first}, {chunk.second}, {axis});
}

/// i32 [N]: the column sums of `shifted` [K, N] (w - w_zp in f32, exact).
HostTensor column_sums(const HostTensor &shifted) {
  int64_t K = shifted.shape()[0], N = shifted.shape()[1];
  HostTensor sums(DType::i32, {N});
  const float *sv = shifted.data_as<float>();
  for (int64_t j = 0; j < N; ++j) {
    int64_t s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += static_cast<int64_t>(sv[k * N + j]);
    sums.set_i64(j, s);
  }
  return sums;
}

/// (A - a_zp) @ (w - w_zp) in i32 for an 8-bit A [..., M, K] (rank >= 2)
/// and an 8-bit weight w [K, N] (a constant, or a block's parameter):
/// w kept in one byte, an i32 matmul of the widened values (the CPU's
/// integer GEMM: Codegen/LoweringPlan.h, matmul_uses_int8_gemm) with the
/// zero points folded into row and column sums: A @ w - w_zp * rowsum(A) -
/// a_zp * colsum, colsum = colsum(w - w_zp) (i32 [N], computed at import:
/// column_sums). a_zp: a scalar or [M, 1]; w_zp: a scalar or [N].
Tensor folded_integer_gemm(const Tensor &a, const std::optional<Tensor> &a_zp, const Tensor &w,
                           const std::optional<Tensor> &w_zp, const Tensor &colsum) {
  // Each use of A its own cast: the GEMM's is read by the GEMM alone.
  Tensor y = ops::matmul(ops::cast(a, DType::i32), ops::cast(w, DType::i32));
  if (w_zp)
    y = ops::sub(y, ops::mul(ops::sum(ops::cast(a, DType::i32), {a.rank() - 1}, true), as(*w_zp, DType::i32)));
  if (a_zp)
    y = ops::sub(y, ops::mul(as(*a_zp, DType::i32), colsum));
  return y;
}

/// folded_integer_gemm of a weight known here (`shifted` = w - w_zp), its
/// constants named after `name`.
Tensor folded_integer_gemm(const Tensor &a, const std::optional<Tensor> &a_zp, const HostTensor &w,
                           const std::optional<Tensor> &w_zp, const HostTensor &shifted, const std::string &name) {
  return folded_integer_gemm(a, a_zp, Tensor::from_host(w, name + ".q"), w_zp,
                             Tensor::from_host(column_sums(shifted), name + ".colsum"));
}

/// matmul_integer with an 8-bit weight b [K, N] known at import (and its
/// zero point, if any), or a block's parameter with its column sums (a
/// parameter too: NodeHost::companion): folded_integer_gemm. nullopt
/// otherwise.
std::optional<Tensor> integer_gemm(const OnnxNode &node, const Tensor &a, const std::optional<Tensor> &a_zp,
                                   const Tensor &b, const std::optional<Tensor> &b_zp, size_t b_index,
                                   size_t b_zp_index) {
  if (b.rank() != 2 || (a_zp && !max_shifted(a.dtype(), a_zp)))
    return std::nullopt;
  std::optional<HostTensor> shifted = known_shifted(node, b_index, b_zp_index, 1); // per column
  const Val *colsum = node.companion(b_index, "colsum:" + node.input_name(b_zp_index)); // (keyed by B and b_zp)
  bool parameter = !shifted && colsum && shape_is_static(b.shape()) && b.shape()[0].value() > 0 &&
                   b.shape()[1].value() > 0 && (!b_zp || max_shifted(b.dtype(), b_zp));
  if (!parameter && (!shifted || shifted->numel() == 0))
    return std::nullopt;
  std::optional<Tensor> az, bz;
  if (a_zp)
    az = along_axis(*a_zp, std::max<int64_t>(a.rank(), 2), -2, node, "a_zero_point");
  if (b_zp)
    bz = along_axis(*b_zp, 1, 0, node, "b_zero_point");
  Tensor a2 = a.rank() == 1 ? ops::unsqueeze(a, {0}) : a;
  Tensor y = parameter ? folded_integer_gemm(a2, az, b, bz, node.tensor(*colsum, b_index))
                       : folded_integer_gemm(a2, az, node.known(b_index), bz, *shifted, node.input_name(b_index));
  return a.rank() == 1 ? ops::squeeze(y, {y.rank() - 2}) : y;
}

/// [O, C, 1, 1] → [C, O] (a 1x1 conv's weight as a GEMM's B).
HostTensor pointwise_weight(const HostTensor &w) {
  int64_t o = w.shape()[0], c = w.shape()[1];
  HostTensor out(w.dtype(), {c, o});
  for (int64_t i = 0; i < o; ++i)
    for (int64_t j = 0; j < c; ++j)
      if (is_integer(w.dtype()))
        out.set_i64(j * o + i, w.get_i64(i * c + j));
      else
        out.set_f64(j * o + i, w.get_f64(i * c + j));
  return out;
}

/// ConvInteger/QLinearConv's accumulator on the integer GEMM: a 1x1 conv
/// (stride 1, no padding, one group, 2-D) of an 8-bit weight known at
/// import (its zero point too): per image, x [C, H*W] transposed to rows of
/// C bytes, folded_integer_gemm with wᵀ [C, O], transposed back to [O, H,
/// W] (plus the bias). nullopt otherwise.
std::optional<Tensor> pointwise_conv_integer(const OnnxNode &node, const Tensor &x, const std::optional<Tensor> &x_zp,
                                             const Tensor &w, const std::optional<Tensor> &w_zp,
                                             const std::optional<Tensor> &bias, size_t w_index, size_t w_zp_index) {
  if (x.rank() != 4 || w.rank() != 4 || node.attr_int("group", 1) != 1)
    return std::nullopt;
  for (int64_t d = 0; d < 4; ++d)
    if (!w.shape()[d].is_static() || (d >= 2 && w.shape()[d].value() != 1))
      return std::nullopt;
  auto all = [](const std::vector<int64_t> &v, int64_t value) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == value; });
  };
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (!all(node.attr_ints("strides"), 1) || !all(node.attr_ints("pads"), 0) ||
      (auto_pad != "NOTSET" && auto_pad != "VALID"))
    return std::nullopt;
  std::optional<HostTensor> shifted = known_shifted(node, w_index, w_zp_index, 0); // per output channel
  if (!shifted || shifted->numel() == 0 || (x_zp && !max_shifted(x.dtype(), x_zp)))
    return std::nullopt;
  std::optional<Tensor> xz, wz;
  if (x_zp)
    xz = along_axis(*x_zp, 0, 0, node, "x_zero_point");
  if (w_zp)
    wz = along_axis(*w_zp, 1, 0, node, "w_zero_point");
  Shape s = x.shape(); // a copy: recording ops may move the graph's types
  Tensor rows = ops::permute(ops::reshape(x, {s[0], s[1], s[2] * s[3]}), {0, 2, 1}); // [N, H*W, C]
  Tensor y = folded_integer_gemm(rows, xz, pointwise_weight(node.known(w_index)), wz, pointwise_weight(*shifted),
                                 node.input_name(w_index));
  Shape ys = {s[0], w.shape()[0], s[2], s[3]};
  y = ops::reshape(ops::permute(y, {0, 2, 1}), ys);
  if (bias)
    y = ops::add(y, ops::reshape(*bias, {w.shape()[0], Dim(1), Dim(1)}));
  return y;
}

/// (int32(a) - a_zp) @ (int32(b) - b_zp): a_zp per tensor or per row of a,
/// b_zp per tensor or per column of b. With an 8-bit weight known at import:
/// integer_gemm. Else in f32 chunks of K summed in i32 (exact: see the top
/// of the file); in i32 where K is not static.
Tensor matmul_integer(const OnnxNode &node, const Tensor &a, const std::optional<Tensor> &a_zp, const Tensor &b,
                      const std::optional<Tensor> &b_zp, size_t b_index, size_t b_zp_index) {
  require_8bit(a, node, "A");
  require_8bit(b, node, "B");
  if (a.rank() < 1 || b.rank() < 1)
    bad(node.op() + " needs inputs of rank at least 1");
  if (std::optional<Tensor> y = integer_gemm(node, a, a_zp, b, b_zp, b_index, b_zp_index))
    return *y;
  std::optional<double> amax = max_shifted(a.dtype(), a_zp), bmax = max_shifted(b.dtype(), b_zp);
  const Dim &kdim = b.shape()[b.rank() == 1 ? 0 : b.rank() - 2];
  bool fast = amax && bmax && kdim.is_static();
  for (const Dim &d : b.shape())
    fast = fast && d.is_static();
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::optional<HostTensor> bk;
  if (fast) {
    int64_t K = kdim.value(), N = b.rank() == 1 ? 1 : b.shape()[b.rank() - 1].value();
    int64_t batch = 1;
    for (int64_t i = 0; i + 2 < b.rank(); ++i)
      batch *= b.shape()[i].value();
    bk = known_shifted(node, b_index, b_zp_index, b.rank() - 1);
    // Outputs j = (batch, column), reduction k; unknown b: the same cost
    // for every output.
    const float *bv = bk ? bk->data_as<float>() : nullptr;
    double unknown = *amax * *bmax;
    chunks = exact_chunks(K, bv ? batch * N : 1, [&](int64_t j, int64_t k) {
      return bv ? *amax * std::abs(bv[(j / N * K + k) * N + j % N]) : unknown;
    });
  }
  DType acc = chunks.empty() ? DType::i32 : DType::f32;
  Tensor ai = as(a, acc), bi = as(b, acc);
  if (a_zp)
    ai = ops::sub(ai, as(along_axis(*a_zp, std::max<int64_t>(a.rank(), 2), -2, node, "a_zero_point"), acc));
  if (b_zp)
    bi = ops::sub(bi, as(along_axis(*b_zp, 1, 0, node, "b_zero_point"), acc));
  bool a_vec = ai.rank() == 1, b_vec = bi.rank() == 1;
  if (a_vec)
    ai = ops::unsqueeze(ai, {0});
  if (b_vec) {
    bi = ops::unsqueeze(bi, {1});
    if (bk)
      bk = bk->reshaped({bk->numel(), 1});
  }
  std::optional<Tensor> sum;
  if (chunks.empty()) {
    sum = ops::matmul(ai, bi);
  } else {
    for (const auto &chunk : chunks) {
      bool whole = chunks.size() == 1;
      Tensor ac = whole ? ai : ops::slice(ai, {chunk.first}, {chunk.second}, {ai.rank() - 1});
      Tensor bc = weight_chunk(node, b_index, bk, bi, bi.rank() - 2, chunk, whole);
      Tensor y = ops::cast(ops::matmul(ac, bc), DType::i32);
      sum = sum ? ops::add(*sum, y) : y;
    }
  }
  Tensor y = *sum;
  if (b_vec)
    y = ops::squeeze(y, {y.rank() - 1});
  if (a_vec)
    y = ops::squeeze(y, {y.rank() - (b_vec ? 1 : 2)});
  return y;
}

/// conv(x - x_zp, w - w_zp (+ bias)) as i32: in f32 chunks of input
/// channels summed in i32, else in f64 (exact: see the top of the file);
/// w_zp per tensor or per output channel.
Tensor conv_integer(const OnnxNode &node, const Tensor &x, const std::optional<Tensor> &x_zp, const Tensor &w,
                    const std::optional<Tensor> &w_zp, const std::optional<Tensor> &bias) {
  require_8bit(x, node, "x");
  require_8bit(w, node, "w");
  if (x.rank() != 3 && x.rank() != 4)
    bad(node.op() + " on a rank-" + std::to_string(x.rank()) + " input is not supported (maxc supports 1-D and 2-D)");
  if (x_zp && (x_zp->rank() > 1 || (x_zp->rank() == 1 && !(x_zp->shape()[0].is_static() && x_zp->shape()[0].value() == 1))))
    bad(node.op() + "'s x_zero_point must be a scalar");
  if (bias && bias->dtype() != DType::i32)
    throw Error(ErrorCode::OnnxUnsupportedType, node.op() + "'s bias must be i32");
  size_t w_index = node.op() == "QLinearConv" ? 3 : 1, w_zp_index = node.op() == "QLinearConv" ? 5 : 3;
  if (std::optional<Tensor> y = pointwise_conv_integer(node, x, x_zp, w, w_zp, bias, w_index, w_zp_index))
    return *y;
  std::optional<double> xmax = max_shifted(x.dtype(), x_zp), wmax = max_shifted(w.dtype(), w_zp);
  bool fast = xmax && wmax && w.rank() == x.rank();
  for (const Dim &d : w.shape())
    fast = fast && d.is_static();
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::optional<HostTensor> wk;
  if (fast) {
    int64_t O = w.shape()[0].value(), Cg = w.shape()[1].value(), taps = 1;
    for (int64_t i = 2; i < w.rank(); ++i)
      taps *= w.shape()[i].value();
    wk = known_shifted(node, w_index, w_zp_index, 0);
    std::vector<double> cost(static_cast<size_t>(O * Cg), *xmax * *wmax * static_cast<double>(taps));
    if (wk)
      for (int64_t oc = 0; oc < O * Cg; ++oc) {
        double s = 0;
        for (int64_t t = 0; t < taps; ++t)
          s += std::abs(wk->data_as<float>()[oc * taps + t]);
        cost[oc] = *xmax * s;
      }
    chunks = exact_chunks(Cg, O, [&](int64_t o, int64_t c) { return cost[o * Cg + c]; });
    if (chunks.size() > 1 && node.attr_int("group", 1) != 1)
      chunks.clear(); // a chunk of a grouped conv's channels is no conv
  }
  if (chunks.empty()) {
    Tensor xf = as(x, DType::f64), wf = as(w, DType::f64);
    if (x_zp)
      xf = ops::sub(xf, as(along_axis(*x_zp, x.rank(), 0, node, "x_zero_point"), DType::f64));
    if (w_zp)
      wf = ops::sub(wf, as(along_axis(*w_zp, w.rank(), 0, node, "w_zero_point"), DType::f64));
    std::optional<Tensor> b;
    if (bias)
      b = ops::cast(*bias, DType::f64);
    return ops::cast(conv_of(node, xf, wf, b), DType::i32);
  }
  Tensor xf = as(x, DType::f32);
  if (x_zp)
    xf = ops::sub(xf, as(along_axis(*x_zp, x.rank(), 0, node, "x_zero_point"), DType::f32));
  Tensor wf = wk ? Tensor() : as(w, DType::f32);
  if (!wk && w_zp)
    wf = ops::sub(wf, as(along_axis(*w_zp, w.rank(), 0, node, "w_zero_point"), DType::f32));
  std::optional<Tensor> sum;
  for (const auto &chunk : chunks) {
    bool whole = chunks.size() == 1;
    Tensor xc = whole ? xf : ops::slice(xf, {chunk.first}, {chunk.second}, {1});
    Tensor wc = weight_chunk(node, w_index, wk, wf, 1, chunk, whole);
    Tensor y = ops::cast(conv_of(node, xc, wc, std::nullopt, /*exact=*/true), DType::i32);
    sum = sum ? ops::add(*sum, y) : y;
  }
  if (bias)
    sum = ops::add(*sum, along_axis(*bias, x.rank(), 1, node, "bias"));
  return *sum;
}

/// The requantized output of QLinearMatMul/QLinearConv: acc (integer
/// valued) as f32 times (x_scale * w_scale) / y_scale, saturated around y_zp.
Tensor requantize(const OnnxNode &node, const Tensor &acc, const Tensor &x_scale, const Tensor &w_scale,
                  const Tensor &y_scale, const Tensor &y_zp) {
  Tensor mult = ops::div(ops::mul(as(x_scale, DType::f32), as(w_scale, DType::f32)), as(y_scale, DType::f32));
  return saturate(ops::mul(as(acc, DType::f32), mult), y_zp, y_zp.dtype(), node);
}

/// requantize with every scale and the zero point known at import
/// (x_scale, y_scale and y_zp one element each, w_scale one or n): the same
/// f32 arithmetic done here, the multiplier ((alpha · x_scale) · w_scale) /
/// y_scale a constant of `shape` (n elements) and the zero point a literal,
/// so the kernels read constants rather than values computed at run time.
/// Else the traced form (requantize).
Tensor requantize_known(const OnnxNode &node, const Tensor &acc, size_t xs, size_t ws, size_t ys, size_t yz,
                        float alpha, const std::vector<int64_t> &shape, const std::function<Tensor()> &traced) {
  std::optional<double> x = known_one(node, xs), y = known_one(node, ys), z = known_one(node, yz);
  if (!x || !y || !z || !node.has(ws) || node.val(ws).kind != Val::Kind::known)
    return traced();
  HostTensor w = node.known(ws);
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (w.numel() != 1 && w.numel() != n)
    return traced();
  HostTensor mult(DType::f32, w.numel() == 1 ? std::vector<int64_t>{} : shape);
  for (int64_t i = 0; i < w.numel(); ++i) {
    float a = alpha * static_cast<float>(*x); // alpha 1: exactly x_scale
    mult.data_as<float>()[i] = (a * static_cast<float>(w.get_f64(i))) / static_cast<float>(*y);
  }
  Tensor m = Tensor::from_host(mult, node.input_name(ws) + ".requant");
  DType dtype = node.val(yz).data.dtype();
  return saturate(ops::mul(as(acc, DType::f32), m), ops::scalar(*z, DType::f32), dtype, node);
}

// ---- ONNX Runtime's contrib integer ops (com.microsoft), with the
// arithmetic of its x86 CPU kernels (MLAS). They are what its QDQ
// transformer turns QDQ groups into (OnnxQdq.cpp) and what its QOperator
// quantization format writes.

/// A scale or zero point input that must be known at import (a constant):
/// its one element.
double known_scalar(const OnnxNode &node, size_t i, const std::string &what) {
  if (!node.has(i) || node.val(i).kind != Val::Kind::known)
    bad(node.op() + "'s " + what + " must be a constant (known at import)");
  HostTensor t = node.known(i);
  if (t.numel() != 1)
    bad(node.op() + "'s " + what + " must have one element");
  return t.get_f64(0);
}

/// 2^(e - 23) for the f32 v (its last mantissa bit); 2^-149 for 0 and subnormals.
double f32_lsb(float v) {
  int e = 0;
  if (v == 0 || std::fabs(v) < 0x1p-126f)
    return 0x1p-149;
  std::frexp(v, &e); // v = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

/// QLinearAdd's constants as MLAS computes them (f32): the ratios a/c, b/c
/// and the fixed part zc - (ra * za + rb * zb) (no FMA contraction).
struct QAddConsts {
  float ra, rb, fixed;
};

QAddConsts qadd_consts(float sa, int64_t za, float sb, int64_t zb, float sc, int64_t zc) {
  float ra = sa / sc, rb = sb / sc;
  float t1 = ra * static_cast<float>(za), t2 = rb * static_cast<float>(zb);
  float fixed = static_cast<float>(zc) - (t1 + t2);
  return {ra, rb, fixed};
}

} // namespace

bool qlinear_add_exact(float sa, int64_t za, float sb, int64_t zb, float sc, int64_t zc, bool u8) {
  if (!(sa > 0) || !(sb > 0) || !(sc > 0) || !std::isfinite(sa / sc) || !std::isfinite(sb / sc))
    return false;
  QAddConsts k = qadd_consts(sa, za, sb, zb, sc, zc);
  (void)u8;
  // Every value of the emulation (x * r for 8-bit x, the f32 partial sums)
  // is a multiple of the smallest last bit among ra, rb and fixed; f64 adds
  // them exactly while their magnitudes stay below 2^52 of that unit, so
  // each FMA's one rounding is the final cast's. Results past 2^30 would
  // meet cvtps2dq's overflow value: refused too.
  double unit = std::min({f32_lsb(k.ra), f32_lsb(k.rb), f32_lsb(k.fixed)});
  double magnitude = 256.0 * (std::fabs(k.ra) + std::fabs(k.rb)) + std::fabs(k.fixed) + 1;
  return std::isfinite(k.fixed) && magnitude < 0x1p30 && magnitude / unit < 0x1p52;
}

namespace {

/// fma(x, r, y) of f32 values, x an 8-bit integer tensor: in f64, exact
/// under qlinear_add_exact, then one rounding to f32.
Tensor fma_f32(const Tensor &x, float r, const Tensor &y) {
  Tensor p = ops::mul(ops::cast(x, DType::f64), ops::scalar(static_cast<double>(r), DType::f64));
  return ops::cast(ops::add(p, as(y, DType::f64)), DType::f32);
}

/// com.microsoft QLinearAdd (A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
/// C_zp) as MLAS's AVX2 kernel computes it: c = round(fma(a, ra, fma(b, rb,
/// fixed))) saturated, with a or b of one element folded into the fixed
/// part first (a multiply and an add in f32, then one FMA).
Tensor qlinear_add(const OnnxNode &node) {
  Tensor a = node.in(0), b = node.in(3);
  require_8bit(a, node, "A");
  require_8bit(b, node, "B");
  if (a.dtype() != b.dtype())
    bad("QLinearAdd's A and B must have the same type");
  float sa = static_cast<float>(known_scalar(node, 1, "A_scale"));
  float sb = static_cast<float>(known_scalar(node, 4, "B_scale"));
  float sc = static_cast<float>(known_scalar(node, 6, "C_scale"));
  int64_t za = node.has(2) ? static_cast<int64_t>(known_scalar(node, 2, "A_zero_point")) : 0;
  int64_t zb = node.has(5) ? static_cast<int64_t>(known_scalar(node, 5, "B_zero_point")) : 0;
  int64_t zc = node.has(7) ? static_cast<int64_t>(known_scalar(node, 7, "C_zero_point")) : 0;
  if (!qlinear_add_exact(sa, za, sb, zb, sc, zc, a.dtype() == DType::u8))
    throw Error(ErrorCode::OnnxUnsupportedOp,
                "QLinearAdd with these scales is not supported (their ratios span more than maxc computes exactly)");
  QAddConsts k = qadd_consts(sa, za, sb, zb, sc, zc);
  auto one = [](const Tensor &t) {
    for (const Dim &d : t.shape())
      if (!d.is_static() || d.value() != 1)
        return false;
    return true;
  };
  Tensor fixed = ops::scalar(k.fixed, DType::f32);
  Tensor c;
  if (one(a) && !one(b)) {
    Tensor f = ops::add(fixed, ops::mul(ops::cast(a, DType::f32), ops::scalar(k.ra, DType::f32)));
    c = fma_f32(b, k.rb, f);
  } else if (one(b)) {
    Tensor f = ops::add(fixed, ops::mul(ops::cast(b, DType::f32), ops::scalar(k.rb, DType::f32)));
    c = fma_f32(a, k.ra, f);
  } else {
    // The fixed part as the f64 literal it is (not a cast of an f32 scalar,
    // which a plan stores): codegen then sees each f32 FMA's three f32
    // operands (FpRange.h, exact_fma_f32).
    c = fma_f32(a, k.ra, fma_f32(b, k.rb, ops::scalar(static_cast<double>(k.fixed), DType::f64)));
  }
  return saturate(c, std::nullopt, a.dtype(), node);
}

/// com.microsoft QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp;
/// NCHW): MLAS's sum of the integers minus zp · HW, times x_scale / (y_scale
/// · HW) in f32, rounded and saturated around y_zp.
Tensor qlinear_global_average_pool(const OnnxNode &node) {
  Tensor x = node.in(0);
  require_8bit(x, node, "X");
  if (node.attr_int("channels_last", 0) != 0)
    bad("QLinearGlobalAveragePool with channels_last=1 is not supported");
  if (x.rank() < 3)
    bad("QLinearGlobalAveragePool needs an input of rank at least 3");
  int64_t hw = 1;
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank(); ++i) {
    hw *= static_dim(x.shape()[i], "QLinearGlobalAveragePool's spatial dims");
    axes.push_back(i);
  }
  float sx = static_cast<float>(known_scalar(node, 1, "x_scale"));
  float sy = static_cast<float>(known_scalar(node, 3, "y_scale"));
  int64_t zx = node.has(2) ? static_cast<int64_t>(known_scalar(node, 2, "x_zero_point")) : 0;
  Tensor zy = node.has(4) ? node.in(4) : ops::scalar(0, x.dtype());
  float scale = sx / (sy * static_cast<float>(hw));
  Tensor acc = ops::sum(ops::cast(x, DType::i32), axes, true);
  if (zx)
    acc = ops::sub(acc, ops::scalar(static_cast<double>(zx * hw), DType::i32));
  return saturate(ops::mul(ops::cast(acc, DType::f32), ops::scalar(scale, DType::f32)),
                  along_axis(zy, 0, 0, node, "y_zero_point"), x.dtype(), node);
}

/// com.microsoft QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale,
/// y_zp; transB, alpha): the integer product (B known at import, kept in 8
/// bits: folded_integer_gemm) plus the int32 C, requantized with (alpha ·
/// a_scale · b_scale) / y_scale like QLinearMatMul, or without y_scale the
/// f32 product times alpha · a_scale · b_scale.
Tensor qgemm(const OnnxNode &node) {
  Tensor a = node.in(0), b = node.in(3);
  require_8bit(a, node, "A");
  require_8bit(b, node, "B");
  if (node.attr_int("transA", 0) != 0)
    bad("QGemm with transA=1 is not supported");
  if (a.rank() != 2 || b.rank() != 2 || !node.has(3) || node.val(3).kind != Val::Kind::known)
    bad("QGemm needs a 2-D A and a 2-D B known at import");
  bool trans_b = node.attr_int("transB", 0) != 0;
  HostTensor bk = node.known(3);
  if (trans_b)
    bk = pointwise_weight(bk.reshaped({bk.shape()[0], bk.shape()[1], 1, 1})); // [N, K] → [K, N]
  int64_t K = bk.shape()[0], N = bk.shape()[1];
  std::optional<HostTensor> zk;
  if (node.has(5)) {
    if (node.val(5).kind != Val::Kind::known)
      bad("QGemm's b_zero_point must be a constant");
    zk = node.known(5);
    if (zk->numel() != 1 && zk->numel() != N)
      bad("QGemm's b_zero_point must have 1 or N elements");
  }
  HostTensor shifted(DType::f32, {K, N});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      shifted.data_as<float>()[k * N + j] =
          static_cast<float>(bk.get_f64(k * N + j) - (zk ? zk->get_f64(zk->numel() == 1 ? 0 : j) : 0.0));
  std::optional<Tensor> az, bz;
  if (node.has(2))
    az = along_axis(node.in(2), 0, 0, node, "a_zero_point");
  if (node.has(5))
    bz = along_axis(node.in(5), 1, 0, node, "b_zero_point");
  Tensor acc = folded_integer_gemm(a, az, bk, bz, shifted, node.input_name(3));
  if (node.has(6)) {
    Tensor c = node.in(6);
    if (c.dtype() != DType::i32)
      throw Error(ErrorCode::OnnxUnsupportedType, "QGemm's C must be i32");
    acc = ops::add(acc, c);
  }
  Tensor a_scale = ops::mul(ops::scalar(node.attr_float("alpha", 1.0), DType::f32),
                            as(along_axis(node.in(1), 0, 0, node, "a_scale"), DType::f32));
  Tensor b_scale = along_axis(node.in(4), 1, 0, node, "b_scale");
  if (!node.has(7))
    return ops::mul(ops::cast(acc, DType::f32), ops::mul(a_scale, as(b_scale, DType::f32)));
  return requantize_known(node, acc, 1, 4, 7, 8, static_cast<float>(node.attr_float("alpha", 1.0)), {N}, [&] {
    Tensor y_zp = node.has(8) ? node.in(8) : ops::scalar(0, a.dtype());
    return requantize(node, acc, a_scale, b_scale, along_axis(node.in(7), 0, 0, node, "y_scale"),
                      along_axis(y_zp, 0, 0, node, "y_zero_point"));
  });
}

const std::set<std::string> kQuantizedOps = {"ConvInteger",   "DequantizeLinear", "DynamicQuantizeLinear",
                                             "MatMulInteger", "QLinearConv",      "QLinearMatMul",
                                             "QuantizeLinear"};

} // namespace

std::optional<HostTensor> integer_gemm_column_sums(const HostTensor &b, const HostTensor *zp) {
  if (b.shape().size() != 2 || (b.dtype() != DType::u8 && b.dtype() != DType::i8) || b.numel() == 0)
    return std::nullopt;
  std::optional<HostTensor> shifted = shifted_values(b, zp, 1); // per column, as integer_gemm's
  return shifted ? std::optional<HostTensor>(column_sums(*shifted)) : std::nullopt;
}

bool is_quantized_op(const std::string &op) { return kQuantizedOps.count(op) != 0; }

bool is_quantized_contrib_op(const std::string &op) {
  return op == "QLinearAdd" || op == "QLinearGlobalAveragePool" || op == "QGemm";
}

std::vector<Tensor> quantized_contrib(const OnnxNode &node) {
  if (node.op() == "QLinearAdd")
    return {qlinear_add(node)};
  if (node.op() == "QLinearGlobalAveragePool")
    return {qlinear_global_average_pool(node)};
  if (node.op() == "QGemm")
    return {qgemm(node)};
  throw Error(ErrorCode::Internal, node.op() + " is not a quantized contrib op");
}

std::vector<Tensor> quantized(const OnnxNode &node) {
  const std::string &op = node.op();
  if (op == "QuantizeLinear")
    return {quantize_linear(node)};
  if (op == "DequantizeLinear")
    return {dequantize_linear(node)};
  if (op == "DynamicQuantizeLinear")
    return dynamic_quantize_linear(node);
  if (op == "MatMulInteger")
    return {matmul_integer(node, node.in(0), optional_in(node, 2), node.in(1), optional_in(node, 3), 1, 3)};
  if (op == "ConvInteger")
    return {conv_integer(node, node.in(0), optional_in(node, 2), node.in(1), optional_in(node, 3), std::nullopt)};
  if (op == "QLinearMatMul") {
    Tensor a = node.in(0), b = node.in(3);
    Tensor acc = matmul_integer(node, a, node.in(2), b, node.in(5), 3, 5);
    int64_t rank = std::max<int64_t>(acc.rank(), 2);
    Tensor a_scale = along_axis(node.in(1), rank, -2, node, "a_scale");
    Tensor b_scale = along_axis(node.in(4), 1, 0, node, "b_scale");
    Tensor y_scale = along_axis(node.in(6), rank, -2, node, "y_scale");
    Tensor y_zp = node.in(7);
    auto traced = [&] {
      return requantize(node, acc, a_scale, b_scale, y_scale, along_axis(y_zp, rank, -2, node, "y_zero_point"));
    };
    const Dim &n = b.shape()[b.rank() - 1];
    if (b.rank() < 2 || !n.is_static())
      return {traced()};
    return {requantize_known(node, acc, 1, 4, 6, 7, 1.0f, {n.value()}, traced)};
  }
  if (op == "QLinearConv") {
    Tensor x = node.in(0), w = node.in(3);
    Tensor acc = conv_integer(node, x, node.in(2), w, node.in(5), optional_in(node, 8));
    Tensor w_scale = along_axis(node.in(4), acc.rank(), 1, node, "w_scale");
    Tensor x_scale = node.in(1), y_scale = node.in(6), y_zp = node.in(7);
    for (const Tensor *t : {&x_scale, &y_scale, &y_zp})
      if (t->rank() > 1 || (t->rank() == 1 && !(t->shape()[0].is_static() && t->shape()[0].value() == 1)))
        bad("QLinearConv's x_scale, y_scale and y_zero_point must be scalars");
    auto traced = [&] {
      return requantize(node, acc, along_axis(x_scale, 0, 0, node, "x_scale"), w_scale,
                        along_axis(y_scale, 0, 0, node, "y_scale"), along_axis(y_zp, 0, 0, node, "y_zero_point"));
    };
    if (!w.shape()[0].is_static())
      return {traced()};
    std::vector<int64_t> shape(static_cast<size_t>(acc.rank() - 1), 1); // [O, 1, ...]: along the channels
    shape[0] = w.shape()[0].value();
    return {requantize_known(node, acc, 1, 4, 6, 7, 1.0f, shape, traced)};
  }
  throw Error(ErrorCode::Internal, op + " is not a quantized op");
}

} // namespace maxc::onnx_import
