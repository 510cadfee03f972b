// A transposed convolution (one group, no dilation) is one GEMM and a
// col2im. With stride s and kernel k per spatial axis, write k' = r*s for
// r = ceil(k/s) (the weight padded with k' - k zero taps) and split each tap
// i = q*s + t (q < r, t < s). Input pixel y lands at y*s + i = (y + q)*s + t,
// so with m = W'^T x ([O*kh'*kw', C] x [C, H*W]) viewed as
// [N, O, rh, sh, rw, sw, H, W]:
//
//   full[n, o, Y*sh + th, X*sw + tw] = sum_{qh, qw} m[n, o, qh, th, qw, tw, Y - qh, X - qw]
//
// (a term is zero where Y - qh or X - qw falls outside the input), over
// (H + rh - 1)*sh rows and (W + rw - 1)*sw columns; the output is full
// cropped by the padding (and extended by output_padding, zeros plus bias).
// In ops: each (qh, qw) is a slice of m padded by (qh, rh-1-qh) along H and
// (qw, rw-1-qw) along W; the rh*rw terms are added, transposed to
// [N, O, Y, th, X, tw] (+ bias), reshaped to [N, O, Y*sh, X*sw] and sliced.
//
// Stride = kernel without padding (r = 1: decoders' and segmentation heads'
// 2x2 / stride-2 upsampling, PaddleOCR's DB head, U-Nets) is the GEMM and a
// depth-to-space view alone:
//
//   m = matmul(reshape(W, [C, O*kh*kw]), reshape(x, [N, C, H*W]), transpose_a)
//   y = reshape(transpose(reshape(m, [N, O, kh, kw, H, W]), [0, 1, 4, 2, 5, 3])
//               (+ reshape(b, [O, 1, 1, 1, 1])), [N, O, H*kh, W*kw])
//
// Overlapping windows (kernel 8, stride 4: HTDemucs' decoders, audio
// upsamplers) add a handful of shifted terms. The direct lowering reads the
// C input planes per output element at plane strides (and recomputes a
// fused producer C times), scalar; the GEMM reads each input element once.
// Same sums in another order: within f32 rounding of the reference.
#include "maxc/Transforms/ConvTransposeAsMatmul.h"

#include "maxc/Ops/Ops.h"

#include <algorithm>
#include <limits>

namespace maxc {

namespace {

bool all_equal(const std::vector<int64_t> &v, int64_t value) {
  for (int64_t e : v)
    if (e != value)
      return false;
  return true;
}

// At most this many shifted terms (rh * rw) per output element: past it
// (large kernels at stride 1) the col2im's reads approach the direct form's.
constexpr int64_t kMaxTerms = 16;

class ConvTransposeAsMatmul final : public RewritePattern {
public:
  const char *name() const override { return "conv-transpose-as-matmul"; }
  const char *root_op() const override { return "conv_transpose2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &) const override {
    const Attrs &a = node.attrs;
    const Tensor &x = in[0], &w = in[1];
    if (x.rank() != 4 || w.rank() != 4 || !is_float(x.dtype()) || a.get_int("groups") != 1 ||
        !all_equal(a.get_ints("dilation"), 1))
      return {};
    const Shape &ws = w.shape(), &xs = x.shape();
    std::vector<int64_t> stride = a.get_ints("stride"), padding = a.get_ints("padding"),
                         out_pad = a.get_ints("output_padding");
    if (padding.size() == 2)
      padding = {padding[0], padding[1], padding[0], padding[1]};
    if (!shape_is_static(ws) || stride.size() != 2 || padding.size() != 4 || out_pad.size() != 2)
      return {};
    const int64_t C = ws[0].value(), O = ws[1].value();
    const int64_t k[2] = {ws[2].value(), ws[3].value()}, s[2] = {stride[0], stride[1]};
    if (k[0] * k[1] == 1 && s[0] * s[1] == 1)
      return {}; // a 1x1 stride-1 transposed conv is a pointwise conv already
    const int64_t r[2] = {(k[0] + s[0] - 1) / s[0], (k[1] + s[1] - 1) / s[1]};
    if (r[0] * r[1] > kMaxTerms)
      return {};
    const Dim N = xs[0], H = xs[2], W = xs[3];
    // Per axis: the full result's length is (in + r - 1)*s; the output is
    // [p0, p0 + out) of it with out = (in-1)*s - p0 - p1 + k + output_padding,
    // so `tail` = full - (p0 + out) = r*s - k - output_padding + p1 positions
    // go at the end (negative: zeros appended).
    int64_t tail[2];
    bool crop = false;
    for (int i = 0; i < 2; ++i) {
      tail[i] = r[i] * s[i] - k[i] - out_pad[i] + padding[2 + i];
      if (padding[i] != 0 || tail[i] != 0) {
        crop = true;
        if (padding[i] < 0 || padding[2 + i] < 0)
          return {};
      }
    }
    // f16/bf16 round after every op: the shifted sums and a separate bias
    // add would each round, where the reference rounds once. Only the bare
    // GEMM form (stride = kernel, no crop) keeps them.
    if ((r[0] * r[1] > 1 || crop) && x.dtype() != DType::f32 && x.dtype() != DType::f64)
      return {};
    const int64_t kp[2] = {r[0] * s[0], r[1] * s[1]};
    Tensor wp = w;
    if (kp[0] != k[0] || kp[1] != k[1])
      wp = ops::pad(w, {0, 0, 0, 0, 0, kp[0] - k[0], 0, kp[1] - k[1]});
    Tensor xm = ops::reshape(x, {N, C, H * W});
    Tensor cols;
    if (r[0] * r[1] == 1) {
      Tensor m = ops::matmul(ops::reshape(wp, {C, O * kp[0] * kp[1]}), xm, true, false);
      cols = ops::reshape(m, {N, O, s[0], s[1], H, W});
    } else {
      // The GEMM's rows ordered (qh, qw, o, th, tw): each term is a block of
      // B = O*sh*sw contiguous rows of m, a slice of the stored GEMM result
      // that is fused into the sum (a view of m read by several slices
      // would be a stored copy). The weight's transpose folds at compile
      // time.
      const int64_t B = O * s[0] * s[1];
      Tensor wq = ops::transpose(ops::reshape(wp, {C, O, r[0], s[0], r[1], s[1]}), {0, 2, 4, 1, 3, 5});
      Tensor m = ops::matmul(ops::reshape(wq, {C, r[0] * r[1] * B}), xm, true, false);
      std::optional<Tensor> sum;
      for (int64_t qh = 0; qh < r[0]; ++qh)
        for (int64_t qw = 0; qw < r[1]; ++qw) {
          const int64_t q = qh * r[1] + qw;
          Tensor term = ops::reshape(ops::slice(m, {q * B}, {(q + 1) * B}, {1}), {N, O, s[0], s[1], H, W});
          std::vector<int64_t> pads(12, 0);
          pads[8] = qh, pads[9] = r[0] - 1 - qh, pads[10] = qw, pads[11] = r[1] - 1 - qw;
          term = ops::pad(term, pads);
          sum = sum ? *sum + term : term;
        }
      cols = *sum;
    }
    // Without a crop the bias goes on the 6-D transpose, whose innermost
    // axis is the small sw: the CPU's loop over it unrolls, and the loop
    // over W then reads m's rows contiguously and stores sw interleaved
    // vectors. The reshape is a view of that contiguous result.
    Tensor y = ops::transpose(cols, {0, 1, 4, 2, 5, 3});
    if (!crop && in.size() > 2)
      y = y + ops::reshape(in[2], {O, 1, 1, 1, 1});
    y = ops::reshape(y, {N, O, (H + (r[0] - 1)) * s[0], (W + (r[1] - 1)) * s[1]});
    if (!crop)
      return {y};
    // Output padding past the full result is zeros (then the bias, like
    // every other position); the padding is cut off both ends.
    if (tail[0] < 0 || tail[1] < 0)
      y = ops::pad(y, {0, 0, 0, 0, 0, std::max<int64_t>(0, -tail[0]), 0, std::max<int64_t>(0, -tail[1])});
    // A symbolic axis (an audio length) is cut by a gather of the positions
    // [p0, p0 + out): its length `out` is a polynomial in the input's dims,
    // which a slice with integer bounds cannot state.
    std::vector<int64_t> ends(2, std::numeric_limits<int64_t>::max()), starts(2, 0);
    for (int i = 0; i < 2; ++i) {
      const int64_t cut = std::max<int64_t>(0, tail[i]);
      if (y.shape()[2 + i].is_static()) {
        starts[i] = padding[i];
        if (cut > 0)
          ends[i] = y.shape()[2 + i].value() - cut;
      } else if (padding[i] != 0 || cut != 0) {
        Tensor at = ops::iota({y.shape()[2 + i] - Dim(padding[i] + cut)}, 0, DType::i64);
        if (padding[i] != 0)
          at = at + ops::full(static_cast<double>(padding[i]), DType::i64);
        y = ops::gather(y, at, 2 + i);
      }
    }
    y = ops::slice(y, starts, ends, {2, 3});
    if (in.size() > 2)
      y = y + ops::reshape(in[2], {O, 1, 1});
    return {y};
  }
};

} // namespace

const RewritePattern &conv_transpose_as_matmul_pattern() {
  static const ConvTransposeAsMatmul pattern;
  return pattern;
}

} // namespace maxc
