// ONNX Runtime's contrib ops (domain com.microsoft) that maxc imports:
//
//   MatMulNBits  Y = A @ dequant(B)^T (+ bias): matmul_nbits
//                (maxc/Ops/MatmulNbits.h) on B's codes as they are, bits 4
//                and 8, uint8 zero points packed or absent; scales
//                [N * nb] or [N, nb]. A float zero point (same type as A)
//                and g_idx (act-order) are refused.
//   FastGelu     gelu(X + bias), tanh form: ops::gelu(..., "tanh")
//   BiasGelu     gelu(X + bias), erf form
//   SkipLayerNormalization  s = input + skip (+ bias); output
//                layer_norm(s) * gamma (+ beta) over the last axis; the
//                optional outputs mean, inverse std and s
//   FusedMatMul  alpha * op(A) @ op(B), op a transpose of the last two
//                axes (transA/transB; transBatchA/B refused)
//   DynamicQuantizeLSTM  an LSTM whose W [D, I, 4H] and R [D, H, 4H] are
//                8-bit with scales and zero points per direction or per
//                direction and gate column: dequantized to f32 at import
//                (they must be initializers), transposed to ONNX's
//                [D, 4H, I] / [D, 4H, H], and run as LSTM (OnnxRecurrent).
//                ONNX Runtime also quantizes X and h per step; maxc keeps
//                them f32, so results differ from ORT's by that rounding.
// ONNX Runtime's graph optimizer and quantizer write the last five into the
// models they save (transformers.js and Kokoro exports, for one). Its
// integer ops QLinearAdd, QLinearGlobalAveragePool and QGemm are in
// OnnxQuantized.cpp (is_quantized_contrib_op).
#include "OnnxOps.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"

namespace maxc::onnx_import {

namespace {

[[noreturn]] void unsupported(const std::string &what) { throw Error(ErrorCode::OnnxUnsupportedOp, what); }

std::vector<Tensor> matmul_nbits(const OnnxNode &node) {
  for (const char *attr : {"K", "N", "block_size"})
    if (!node.has_attr(attr))
      throw Error(ErrorCode::OnnxAttribute, std::string("MatMulNBits needs the attribute ") + attr);
  NbitsLayout l{node.attr_int("K", 0), node.attr_int("N", 0), node.attr_int("bits", 4), node.attr_int("block_size", 0)};
  if (l.bits != 4 && l.bits != 8)
    unsupported("MatMulNBits with bits=" + std::to_string(l.bits) + " is not supported (bits 4 and 8 are)");
  if (node.has(4))
    unsupported("MatMulNBits with g_idx (act-order quantization) is not supported");
  if (std::string why = nbits_layout_problem(l); !why.empty())
    throw Error(ErrorCode::OnnxAttribute, "MatMulNBits: " + why);
  std::optional<Tensor> zp;
  if (node.has(3)) {
    zp = node.in(3);
    if (zp->dtype() != DType::u8)
      unsupported("MatMulNBits with " + std::string(dtype_name(zp->dtype())) +
                  " zero points is not supported (uint8, packed, are)");
  }
  Tensor a = node.in(0);
  if (a.rank() < 1 || a.shape().back() != Dim(l.k))
    throw Error(ErrorCode::OnnxAttribute, "MatMulNBits: A " + a.type().to_string() + " must have K = " +
                                              std::to_string(l.k) + " as its last dim");
  Tensor y = ops::matmul_nbits(a, node.in(1), node.in(2), zp, l.k, l.n, l.bits, l.block);
  if (node.has(5))
    y = y + node.in(5);
  return {y};
}

Tensor with_bias(const OnnxNode &node, size_t index, Tensor x) {
  return node.has(index) ? x + node.in(index) : x;
}

std::vector<Tensor> skip_layer_norm(const OnnxNode &node) {
  Tensor s = with_bias(node, 4, node.in(0) + node.in(1));
  double eps = node.attr_float("epsilon", 1e-12);
  std::optional<Tensor> beta;
  if (node.has(3))
    beta = node.in(3);
  Tensor gamma = node.in(2);
  int64_t last = s.rank() - 1;
  if (s.rank() < 1 || gamma.rank() != 1 || gamma.shape()[0] != s.shape()[last])
    throw Error(ErrorCode::OnnxAttribute, "SkipLayerNormalization: gamma " + gamma.type().to_string() +
                                              " must have the hidden size of the input " + s.type().to_string());
  std::vector<Tensor> out = {ops::layer_norm(s, gamma, beta, eps)};
  if (node.wants_output(1) || node.wants_output(2)) { // mean and 1/std, as LayerNormalization's
    DType t = s.dtype();
    Tensor mean = ops::mean(s, {last}, true);
    Tensor centered = s - mean;
    Tensor inv = ops::rsqrt(ops::mean(centered * centered, {last}, true) + ops::full(eps, t));
    out.push_back(mean);
    out.push_back(inv);
  } else {
    out.push_back(Tensor());
    out.push_back(Tensor());
  }
  out.push_back(node.wants_output(3) ? s : Tensor());
  return out;
}

std::vector<Tensor> fused_matmul(const OnnxNode &node) {
  if (node.attr_int("transBatchA", 0) != 0 || node.attr_int("transBatchB", 0) != 0)
    unsupported("FusedMatMul with transBatchA/transBatchB is not supported");
  Tensor a = node.in(0), b = node.in(1);
  bool ta = node.attr_int("transA", 0) != 0, tb = node.attr_int("transB", 0) != 0;
  if ((ta && a.rank() < 2) || (tb && b.rank() < 2))
    throw Error(ErrorCode::OnnxAttribute, "FusedMatMul: a transposed operand needs rank >= 2");
  Tensor y = ops::matmul(a, b, ta, tb);
  double alpha = node.attr_float("alpha", 1.0);
  return {alpha == 1.0 ? y : y * ops::full(alpha, y.dtype())};
}

/// W [D, K, G] 8-bit with scale and zero point [D] or [D, G], dequantized and
/// transposed to f32 [D, G, K].
HostTensor dequantized_transposed(const OnnxNode &node, size_t w, size_t scale, size_t zero_point,
                                  const char *what) {
  for (size_t i : {w, scale})
    if (!node.has(i) || node.val(i).kind != Val::Kind::known)
      unsupported(std::string("DynamicQuantizeLSTM needs ") + what + " and its scale as initializers");
  HostTensor q = node.known(w), sc = node.known(scale);
  if (q.rank() != 3 || (q.dtype() != DType::i8 && q.dtype() != DType::u8))
    throw Error(ErrorCode::OnnxAttribute, std::string("DynamicQuantizeLSTM: ") + what + " must be int8 or uint8 of rank 3");
  const int64_t d = q.shape()[0], k = q.shape()[1], g = q.shape()[2];
  std::vector<int64_t> zp;
  if (node.has(zero_point)) {
    if (node.val(zero_point).kind != Val::Kind::known)
      unsupported(std::string("DynamicQuantizeLSTM needs ") + what + "'s zero point as an initializer");
    zp = node.known(zero_point).to_i64();
  }
  std::vector<double> s = sc.to_f64();
  const bool per_column = static_cast<int64_t>(s.size()) == d * g;
  if (!per_column && static_cast<int64_t>(s.size()) != d)
    throw Error(ErrorCode::OnnxAttribute, std::string("DynamicQuantizeLSTM: ") + what + "'s scale has " +
                                              std::to_string(s.size()) + " values, not " + std::to_string(d) +
                                              " or " + std::to_string(d * g));
  if (!zp.empty() && zp.size() != s.size())
    throw Error(ErrorCode::OnnxAttribute, std::string("DynamicQuantizeLSTM: ") + what +
                                              "'s zero point and scale differ in size");
  std::vector<int64_t> codes = q.to_i64();
  std::vector<double> out(static_cast<size_t>(d * g * k));
  for (int64_t di = 0; di < d; ++di)
    for (int64_t gi = 0; gi < g; ++gi) {
      size_t p = static_cast<size_t>(per_column ? di * g + gi : di);
      double step = static_cast<float>(s[p]);
      int64_t z = zp.empty() ? 0 : zp[p];
      for (int64_t ki = 0; ki < k; ++ki)
        out[static_cast<size_t>((di * g + gi) * k + ki)] =
            static_cast<float>(static_cast<double>(codes[static_cast<size_t>((di * k + ki) * g + gi)] - z) * step);
    }
  return HostTensor::from_f64(DType::f32, {d, g, k}, out);
}

std::vector<Tensor> dynamic_quantize_lstm(const OnnxNode &node) {
  Val w, r;
  w.kind = r.kind = Val::Kind::known;
  w.data = dequantized_transposed(node, 1, 8, 9, "W");
  r.data = dequantized_transposed(node, 2, 10, 11, "R");
  onnx::NodeProto proto = node.proto();
  proto.set_op_type("LSTM");
  proto.set_domain("");
  std::vector<const Val *> inputs;
  for (size_t i = 0; i < std::min<size_t>(node.num_inputs(), 8); ++i)
    inputs.push_back(i == 1 ? &w : i == 2 ? &r : node.has(i) ? &node.val(i) : nullptr);
  return recurrent(node.with(proto, inputs));
}

} // namespace

bool is_contrib_op(const std::string &domain, const std::string &op) {
  return domain == "com.microsoft" && (op == "MatMulNBits" || op == "FastGelu" || op == "BiasGelu" ||
                                       op == "SkipLayerNormalization" || op == "FusedMatMul" ||
                                       op == "DynamicQuantizeLSTM" || is_quantized_contrib_op(op));
}

std::vector<Tensor> contrib(const OnnxNode &node) {
  if (node.op() == "MatMulNBits")
    return matmul_nbits(node);
  if (node.op() == "FastGelu")
    return {ops::gelu(with_bias(node, 1, node.in(0)), "tanh")};
  if (node.op() == "BiasGelu")
    return {ops::gelu(with_bias(node, 1, node.in(0)), "none")};
  if (node.op() == "SkipLayerNormalization")
    return skip_layer_norm(node);
  if (node.op() == "FusedMatMul")
    return fused_matmul(node);
  if (node.op() == "DynamicQuantizeLSTM")
    return dynamic_quantize_lstm(node);
  if (is_quantized_contrib_op(node.op()))
    return quantized_contrib(node);
  throw Error(ErrorCode::Internal, node.op() + " is not a contrib op");
}

} // namespace maxc::onnx_import
