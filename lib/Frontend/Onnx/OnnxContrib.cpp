// ONNX Runtime's contrib ops (domain com.microsoft) that maxc imports:
//
//   MatMulNBits  Y = A @ dequant(B)^T (+ bias): matmul_nbits
//                (maxc/Ops/MatmulNbits.h) on B's codes as they are, bits 4
//                and 8, uint8 zero points packed or absent; scales
//                [N * nb] or [N, nb]. A float zero point (same type as A)
//                and g_idx (act-order) are refused.
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

} // namespace

bool is_contrib_op(const std::string &domain, const std::string &op) {
  return domain == "com.microsoft" && (op == "MatMulNBits" || is_quantized_contrib_op(op));
}

std::vector<Tensor> contrib(const OnnxNode &node) {
  if (node.op() == "MatMulNBits")
    return matmul_nbits(node);
  if (is_quantized_contrib_op(node.op()))
    return quantized_contrib(node);
  throw Error(ErrorCode::Internal, node.op() + " is not a contrib op");
}

} // namespace maxc::onnx_import
