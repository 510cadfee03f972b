// conv2d with dilation (dh, dw), stride 1, a 3x3 kernel, one group, whose
// height and width are multiples of the dilation and whose every pad is a
// multiple of its dilation: output row oy = dh*i + r reads input rows
// oy + dh*ky - top = dh*(i + ky - top/dh) + r, i.e. only the rows of
// residue r, as an undilated conv of the subsampled image
// x[.., r::dh, s::dw] with padding top/dh, ... . So
//   x [N, C, H, W] -> [N, C, H/dh, dh, W/dw, dw] -> [N, dh, dw, C, H/dh, W/dw]
//     -> [N*dh*dw, C, H/dh, W/dw], conv2d (dilation 1, padding / dilation)
//     -> [N, dh, dw, O, OH/dh, OW/dw] -> [N, O, OH/dh, dh, OW/dw, dw] -> [N, O, OH, OW]
// The undilated 3x3 conv takes the CPU's Winograd kernel (a quarter of the
// multiply-adds of im2col + GEMM), which a dilated one never did: M-LSD's
// decoder conv (64 channels, 80x80, dilation 5) was a fifth of the model's
// time. Every output element sums the same products in the same order as
// the dilated conv's direct form; how the kernel chosen for the undilated
// conv rounds is its own (Winograd's bound, LoweringPlan.h).
//
// Only where the subsampled images keep at least kMinSide rows and columns
// (smaller ones make tiny GEMMs), for f32.
#include "maxc/Transforms/DilatedConvAsBatch.h"

#include "maxc/Ops/Ops.h"

namespace maxc {

namespace {

constexpr int64_t kMinSide = 8;

class DilatedConvAsBatch final : public RewritePattern {
public:
  const char *name() const override { return "dilated-conv-as-batch"; }
  const char *root_op() const override { return "conv2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Graph &g = rc.match.graph();
    const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
    const TensorType &y = g.type_of(node.results[0]);
    std::vector<int64_t> dil = node.attrs.get_ints("dilation"), stride = node.attrs.get_ints("stride");
    std::vector<int64_t> pad = node.attrs.get_ints("padding");
    if (pad.size() == 2)
      pad = {pad[0], pad[1], pad[0], pad[1]};
    if (x.dtype != DType::f32 || x.rank() != 4 || dil.size() != 2 || (dil[0] == 1 && dil[1] == 1) ||
        stride != std::vector<int64_t>{1, 1} || pad.size() != 4 || node.attrs.get_int("groups") != 1 ||
        w.shape.size() != 4 || w.shape[2] != Dim(3) || w.shape[3] != Dim(3) || node.attrs.get_int("exact", 0) != 0)
      return {};
    for (size_t i = 1; i < 4; ++i)
      if (!x.shape[i].is_static() || !y.shape[i].is_static())
        return {};
    const int64_t dh = dil[0], dw = dil[1], C = x.shape[1].value(), H = x.shape[2].value(), W = x.shape[3].value();
    const int64_t O = y.shape[1].value(), OH = y.shape[2].value(), OW = y.shape[3].value();
    if (H % dh != 0 || W % dw != 0 || OH % dh != 0 || OW % dw != 0 || pad[0] % dh != 0 || pad[2] % dh != 0 ||
        pad[1] % dw != 0 || pad[3] % dw != 0 || H / dh < kMinSide || W / dw < kMinSide || OH / dh < kMinSide ||
        OW / dw < kMinSide)
      return {};
    const Dim N = x.shape[0];
    Tensor t = ops::reshape(in[0], {N, Dim(C), Dim(H / dh), Dim(dh), Dim(W / dw), Dim(dw)});
    t = ops::reshape(ops::transpose(t, {0, 3, 5, 1, 2, 4}), {N * Dim(dh * dw), Dim(C), Dim(H / dh), Dim(W / dw)});
    ops::Conv2dOptions o;
    o.padding = {pad[0] / dh, pad[1] / dw, pad[2] / dh, pad[3] / dw};
    t = ops::conv2d(t, in[1], in.size() > 2 ? std::optional<Tensor>(in[2]) : std::nullopt, o);
    t = ops::reshape(t, {N, Dim(dh), Dim(dw), Dim(O), Dim(OH / dh), Dim(OW / dw)});
    return {ops::reshape(ops::transpose(t, {0, 3, 4, 1, 5, 2}), y.shape)};
  }
};

} // namespace

const RewritePattern &dilated_conv_as_batch_pattern() {
  static const DilatedConvAsBatch pattern;
  return pattern;
}

} // namespace maxc
