// A transposed convolution whose stride equals its kernel (no padding, no
// dilation, one group) scatters each input pixel into its own kh x kw output
// block: out[n, o, y*kh + i, x*kw + j] = sum_c W[c, o, i, j] * x[n, c, y, x]
// (+ b[o]). That is one GEMM, [O*kh*kw, C] x [C, H*W], and a depth-to-space
// view of its result:
//
//   m = matmul(reshape(W, [C, O*kh*kw]), reshape(x, [N, C, H*W]), transpose_a)
//   y = reshape(transpose(reshape(m, [N, O, kh, kw, H, W]), [0, 1, 4, 2, 5, 3])
//               (+ reshape(b, [O, 1, 1, 1, 1])), [N, O, H*kh, W*kw])
//
// Decoders' and segmentation heads' 2x2 / stride-2 upsampling (PaddleOCR's
// DB head, U-Nets) is written so. The direct lowering reads the C input
// planes per output element at plane strides (and recomputes a fused
// producer C times); the GEMM reads each input element once. Same sums in
// another order: within f32 rounding of the reference.
#include "maxc/Transforms/ConvTransposeAsMatmul.h"

#include "maxc/Ops/Ops.h"

namespace maxc {

namespace {

bool all_equal(const std::vector<int64_t> &v, int64_t value) {
  for (int64_t e : v)
    if (e != value)
      return false;
  return true;
}

class ConvTransposeAsMatmul final : public RewritePattern {
public:
  const char *name() const override { return "conv-transpose-as-matmul"; }
  const char *root_op() const override { return "conv_transpose2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Attrs &a = node.attrs;
    const Tensor &x = in[0], &w = in[1];
    if (x.rank() != 4 || w.rank() != 4 || !is_float(x.dtype()) || a.get_int("groups") != 1 ||
        !all_equal(a.get_ints("padding"), 0) || !all_equal(a.get_ints("output_padding"), 0) ||
        !all_equal(a.get_ints("dilation"), 1))
      return {};
    const Shape &ws = w.shape(), &xs = x.shape();
    std::vector<int64_t> stride = a.get_ints("stride");
    if (!shape_is_static(ws) || stride.size() != 2 || stride[0] != ws[2].value() || stride[1] != ws[3].value())
      return {};
    int64_t C = ws[0].value(), O = ws[1].value(), kh = ws[2].value(), kw = ws[3].value();
    if (kh * kw == 1)
      return {}; // a 1x1 stride-1 transposed conv is a pointwise conv already
    Dim N = xs[0], H = xs[2], W = xs[3];
    Tensor m = ops::matmul(ops::reshape(w, {C, O * kh * kw}), ops::reshape(x, {N, C, H * W}), true, false);
    // The bias goes on the 6-D transpose, whose innermost axis is the
    // small kw: the CPU's loop over it unrolls, and the loop over W then
    // reads m's rows contiguously and stores kw interleaved vectors. The
    // last reshape is a view of that contiguous result.
    Tensor y = ops::transpose(ops::reshape(m, {N, O, kh, kw, H, W}), {0, 1, 4, 2, 5, 3});
    if (in.size() > 2)
      y = y + ops::reshape(in[2], {O, 1, 1, 1, 1});
    return {ops::reshape(y, {N, O, H * kh, W * kw})};
  }
};

} // namespace

const RewritePattern &conv_transpose_as_matmul_pattern() {
  static const ConvTransposeAsMatmul pattern;
  return pattern;
}

} // namespace maxc
