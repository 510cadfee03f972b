// ONNX quantized ops → maxc ops, with ONNX's (and ONNX Runtime's) arithmetic:
//
//   QuantizeLinear      y = saturate(round_half_even(x / scale) + zp), in f32
//   DequantizeLinear    y = f32(int32(x) - int32(zp)) * scale
//   DynamicQuantizeLinear  lo = min(0, min x), hi = max(0, max x),
//                       scale = hi == lo ? 1 : (hi - lo) / 255 (ONNX Runtime's
//                       rule for an all-zero input), zp = round(clip(-lo /
//                       scale, 0, 255)), y = QuantizeLinear(x, scale, zp)
//   MatMulInteger       (int32(a) - a_zp) @ (int32(b) - b_zp), an i32 matmul
//   ConvInteger         conv(x - x_zp, w - w_zp) computed in f64, then i32
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
// The conv has no integer kernel, so ConvInteger and QLinearConv run the
// float conv in f64: every product of two zero-point-shifted 8-bit values
// is at most 255 * 255 in magnitude, so any partial sum of K of them is an
// integer below 2^53 for K < 2^37, and f64 holds it exactly whatever the
// summation order (f32 would be exact only below 2^24, K < 258). The result
// is the ONNX int32 result bit for bit (|sum| < 2^31 for K < 33025; ONNX's
// int32 accumulator would wrap beyond that, the cast saturates). A fast
// integer GEMM/conv is a later stage (issue 25).
#include "OnnxOps.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"

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
  if (zp)
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
  Tensor lo = ops::minimum(ops::min(x, {}), zero), hi = ops::maximum(ops::max(x, {}), zero);
  Tensor scale = ops::where(ops::equal(hi, lo), ops::scalar(1, DType::f32),
                            ops::div(ops::sub(hi, lo), ops::scalar(255, DType::f32)));
  Tensor zp = saturate(ops::sub(zero, ops::div(lo, scale)), std::nullopt, DType::u8, node);
  return {quantize(x, scale, zp, DType::u8, node), scale, zp};
}

/// (int32(a) - a_zp) @ (int32(b) - b_zp): a_zp per tensor or per row of a,
/// b_zp per tensor or per column of b.
Tensor matmul_integer(const OnnxNode &node, const Tensor &a, const std::optional<Tensor> &a_zp, const Tensor &b,
                      const std::optional<Tensor> &b_zp) {
  require_8bit(a, node, "A");
  require_8bit(b, node, "B");
  if (a.rank() < 1 || b.rank() < 1)
    bad(node.op() + " needs inputs of rank at least 1");
  Tensor ai = as(a, DType::i32), bi = as(b, DType::i32);
  if (a_zp)
    ai = ops::sub(ai, as(along_axis(*a_zp, std::max<int64_t>(a.rank(), 2), -2, node, "a_zero_point"), DType::i32));
  if (b_zp)
    bi = ops::sub(bi, as(along_axis(*b_zp, 1, 0, node, "b_zero_point"), DType::i32));
  bool a_vec = ai.rank() == 1, b_vec = bi.rank() == 1;
  if (a_vec)
    ai = ops::unsqueeze(ai, {0});
  if (b_vec)
    bi = ops::unsqueeze(bi, {1});
  Tensor y = ops::matmul(ai, bi);
  if (b_vec)
    y = ops::squeeze(y, {y.rank() - 1});
  if (a_vec)
    y = ops::squeeze(y, {y.rank() - (b_vec ? 1 : 2)});
  return y;
}

/// conv(x - x_zp, w - w_zp (+ bias)) in f64 (exact: see the top of the file);
/// w_zp per tensor or per output channel.
Tensor conv_integer(const OnnxNode &node, const Tensor &x, const std::optional<Tensor> &x_zp, const Tensor &w,
                    const std::optional<Tensor> &w_zp, const std::optional<Tensor> &bias) {
  require_8bit(x, node, "x");
  require_8bit(w, node, "w");
  if (x.rank() != 3 && x.rank() != 4)
    bad(node.op() + " on a rank-" + std::to_string(x.rank()) + " input is not supported (maxc supports 1-D and 2-D)");
  Tensor xf = as(x, DType::f64), wf = as(w, DType::f64);
  if (x_zp) {
    if (x_zp->rank() > 1 || (x_zp->rank() == 1 && !(x_zp->shape()[0].is_static() && x_zp->shape()[0].value() == 1)))
      bad(node.op() + "'s x_zero_point must be a scalar");
    xf = ops::sub(xf, as(along_axis(*x_zp, x.rank(), 0, node, "x_zero_point"), DType::f64));
  }
  if (w_zp)
    wf = ops::sub(wf, as(along_axis(*w_zp, w.rank(), 0, node, "w_zero_point"), DType::f64));
  std::optional<Tensor> b;
  if (bias) {
    if (bias->dtype() != DType::i32)
      throw Error(ErrorCode::OnnxUnsupportedType, node.op() + "'s bias must be i32");
    b = ops::cast(*bias, DType::f64);
  }
  return conv_of(node, xf, wf, b);
}

/// The requantized output of QLinearMatMul/QLinearConv: acc (integer
/// valued) as f32 times (x_scale * w_scale) / y_scale, saturated around y_zp.
Tensor requantize(const OnnxNode &node, const Tensor &acc, const Tensor &x_scale, const Tensor &w_scale,
                  const Tensor &y_scale, const Tensor &y_zp) {
  Tensor mult = ops::div(ops::mul(as(x_scale, DType::f32), as(w_scale, DType::f32)), as(y_scale, DType::f32));
  return saturate(ops::mul(as(acc, DType::f32), mult), y_zp, y_zp.dtype(), node);
}

const std::set<std::string> kQuantizedOps = {"ConvInteger",   "DequantizeLinear", "DynamicQuantizeLinear",
                                             "MatMulInteger", "QLinearConv",      "QLinearMatMul",
                                             "QuantizeLinear"};

} // namespace

bool is_quantized_op(const std::string &op) { return kQuantizedOps.count(op) != 0; }

std::vector<Tensor> quantized(const OnnxNode &node) {
  const std::string &op = node.op();
  if (op == "QuantizeLinear")
    return {quantize_linear(node)};
  if (op == "DequantizeLinear")
    return {dequantize_linear(node)};
  if (op == "DynamicQuantizeLinear")
    return dynamic_quantize_linear(node);
  if (op == "MatMulInteger")
    return {matmul_integer(node, node.in(0), optional_in(node, 2), node.in(1), optional_in(node, 3))};
  if (op == "ConvInteger") {
    Tensor y = conv_integer(node, node.in(0), optional_in(node, 2), node.in(1), optional_in(node, 3), std::nullopt);
    return {ops::cast(y, DType::i32)};
  }
  if (op == "QLinearMatMul") {
    Tensor a = node.in(0), b = node.in(3);
    Tensor acc = matmul_integer(node, a, node.in(2), b, node.in(5));
    int64_t rank = std::max<int64_t>(acc.rank(), 2);
    Tensor a_scale = along_axis(node.in(1), rank, -2, node, "a_scale");
    Tensor b_scale = along_axis(node.in(4), 1, 0, node, "b_scale");
    Tensor y_scale = along_axis(node.in(6), rank, -2, node, "y_scale");
    Tensor y_zp = node.in(7);
    return {requantize(node, acc, a_scale, b_scale, y_scale, along_axis(y_zp, rank, -2, node, "y_zero_point"))};
  }
  if (op == "QLinearConv") {
    Tensor x = node.in(0), w = node.in(3);
    Tensor acc = conv_integer(node, x, node.in(2), w, node.in(5), optional_in(node, 8));
    Tensor w_scale = along_axis(node.in(4), acc.rank(), 1, node, "w_scale");
    Tensor x_scale = node.in(1), y_scale = node.in(6), y_zp = node.in(7);
    for (const Tensor *t : {&x_scale, &y_scale, &y_zp})
      if (t->rank() > 1 || (t->rank() == 1 && !(t->shape()[0].is_static() && t->shape()[0].value() == 1)))
        bad("QLinearConv's x_scale, y_scale and y_zero_point must be scalars");
    return {requantize(node, acc, along_axis(x_scale, 0, 0, node, "x_scale"), w_scale,
                       along_axis(y_scale, 0, 0, node, "y_scale"), along_axis(y_zp, 0, 0, node, "y_zero_point"))};
  }
  throw Error(ErrorCode::Internal, op + " is not a quantized op");
}

} // namespace maxc::onnx_import
