// Convolution and pooling over NCHW tensors: conv2d, conv_transpose2d,
// max_pool2d, avg_pool2d, global_avg_pool2d.
//
// Shape rules (per spatial dim, pads p0/p1 before/after, dilation d):
//   conv:            out = floor((in + p0 + p1 - d*(k-1) - 1) / stride) + 1
//   conv_transpose:  out = (in-1)*stride - p0 - p1 + d*(k-1) + output_padding + 1
//   pools:           conv's rule with d = 1
// `padding` is [top, left, bottom, right]; two values [h, w] mean symmetric
// padding. Channels and the kernel must be static; the batch and the
// spatial dims (H, W) may be symbolic. A symbolic output size is the same
// rule in Dim arithmetic (floor_div by the static stride); that the window
// fits the padded input (in + p0 + p1 >= d*(k-1) + 1) is then a run-time
// precondition of the caller, checked at compile time only for static dims.
// Reference math accumulates in double and rounds once.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <array>
#include <cmath>
#include <limits>

namespace maxc {
using namespace ophelpers;

namespace {

std::string ints_to_string(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// A two-value (h, w) attribute whose entries are all >= min_value.
std::array<int64_t, 2> pair_attr(const std::string &op, const std::vector<int64_t> &v, const char *name,
                                 int64_t min_value) {
  if (v.size() != 2)
    fail_attr(op, std::string(name) + " must have 2 values (h, w), got " + ints_to_string(v));
  for (int64_t x : v)
    if (x < min_value)
      fail_attr(op,
                std::string(name) + " values must be >= " + std::to_string(min_value) + ", got " + ints_to_string(v));
  return {v[0], v[1]};
}

// Padding as [top, left, bottom, right]; [h, w] means [h, w, h, w].
std::array<int64_t, 4> padding_attr(const std::string &op, const Attrs &attrs) {
  std::vector<int64_t> v = attrs.get_ints("padding");
  if (v.size() != 2 && v.size() != 4)
    fail_attr(op, "padding must have 4 values (top, left, bottom, right) or 2 (h, w), got " + ints_to_string(v));
  for (int64_t x : v)
    if (x < 0)
      fail_attr(op, "padding values must be >= 0, got " + ints_to_string(v));
  if (v.size() == 2)
    return {v[0], v[1], v[0], v[1]};
  return {v[0], v[1], v[2], v[3]};
}

/// Dim d of t, which must be static (`want`: the value the weight fixes, or
/// -1 when it does not say).
int64_t static_dim(const std::string &op, const TensorType &t, size_t d, const char *what, int64_t want = -1) {
  if (!t.shape[d].is_static())
    fail_shape(op, std::string(what) + " (dim " + std::to_string(d) + ") must be static, got " + t.to_string() +
                       (want >= 0 ? pin_hint(t.shape[d], want) : std::string()));
  return t.shape[d].value();
}

// Output size of a sliding window; a ShapeMismatch when no window fits a
// static input. A symbolic input gives floordiv(in + pads - span, stride) + 1,
// valid where the window fits (the documented run-time precondition).
Dim window_out(const std::string &op, const char *axis, const Dim &in, int64_t pad0, int64_t pad1, int64_t k,
               int64_t stride, int64_t dilation) {
  int64_t span = dilation * (k - 1) + 1;
  if (!in.is_static())
    return Dim::floor_div(in + Dim(pad0 + pad1 - span), Dim(stride)) + Dim(1);
  if (in.value() + pad0 + pad1 < span)
    fail_shape(op, std::string("the ") + axis + " window (" + std::to_string(span) + ") is larger than the padded " +
                       axis + " (" + std::to_string(in.value()) + " + " + std::to_string(pad0 + pad1) + " padding)");
  return Dim((in.value() + pad0 + pad1 - span) / stride + 1);
}

struct ConvParams {
  std::array<int64_t, 2> stride, dilation, output_padding{0, 0};
  std::array<int64_t, 4> pad;
  int64_t groups;
};

ConvParams conv_params(const std::string &op, const Attrs &attrs, bool transposed) {
  ConvParams p;
  p.stride = pair_attr(op, attrs.get_ints("stride"), "stride", 1);
  p.dilation = pair_attr(op, attrs.get_ints("dilation"), "dilation", 1);
  p.pad = padding_attr(op, attrs);
  p.groups = attrs.get_int("groups");
  if (p.groups < 1)
    fail_attr(op, "groups must be >= 1, got " + std::to_string(p.groups));
  if (transposed) {
    p.output_padding = pair_attr(op, attrs.get_ints("output_padding"), "output_padding", 0);
    for (int i = 0; i < 2; ++i)
      if (p.output_padding[i] >= std::max(p.stride[i], p.dilation[i]))
        fail_attr(op, "output_padding " + std::to_string(p.output_padding[i]) +
                          " must be smaller than the stride or the dilation of its dim");
  }
  return p;
}

struct ConvOperands {
  int64_t C;
  Dim H, W;
  int64_t kh, kw;
};

// Checks shared by conv2d and conv_transpose2d.
ConvOperands check_conv_operands(const std::string &op, const std::vector<TensorType> &operands,
                                  int64_t want_channels) {
  const TensorType &x = operands[0], &w = operands[1];
  require_float(op, x, "input");
  require_same_dtype(op, operands);
  require_same_device(op, operands);
  require_rank(op, x, 4, "input");
  require_rank(op, w, 4, "weight");
  if (!shape_is_static(w.shape))
    fail_shape(op, "weight must have a static shape, got " + w.to_string());
  int64_t C = static_dim(op, x, 1, "input channels", want_channels);
  int64_t kh = w.shape[2].value(), kw = w.shape[3].value();
  if (kh < 1 || kw < 1)
    fail_shape(op, "kernel must be non-empty, got weight " + w.to_string());
  return {C, x.shape[2], x.shape[3], kh, kw};
}

void check_bias(const std::string &op, const std::vector<TensorType> &operands, int64_t out_channels) {
  if (operands.size() < 3)
    return;
  const TensorType &b = operands[2];
  if (b.rank() != 1 || b.shape[0] != Dim(out_channels))
    fail_shape(op,
               "bias must be 1-D of the output channels [" + std::to_string(out_channels) + "], got " + b.to_string());
}

std::vector<double> bias_values(const ReferenceContext &c, int64_t out_channels) {
  if (c.operands.size() > 2)
    return c.operands[2].to_f64();
  return std::vector<double>(static_cast<size_t>(out_channels), 0.0);
}

OpDef conv2d_op() {
  OpDef def;
  def.name = "conv2d";
  def.traits = OpTrait::window | OpTrait::gemm_like;
  def.summary = "2-D convolution, x [N,C,H,W] * weight [O,C/groups,kh,kw] (+ bias [O])";
  def.min_operands = 2;
  def.max_operands = 3;
  def.attrs = {{"stride", AttrKind::ints, AttrValue(std::vector<int64_t>{1, 1}), "(h, w)"},
               {"padding", AttrKind::ints, AttrValue(std::vector<int64_t>{0, 0, 0, 0}),
                "(top, left, bottom, right), or (h, w) for symmetric"},
               {"dilation", AttrKind::ints, AttrValue(std::vector<int64_t>{1, 1}), "(h, w)"},
               {"groups", AttrKind::integer, AttrValue(int64_t{1}), "channel groups (C for depthwise)"},
               {"exact", AttrKind::boolean, AttrValue(false),
                "the operands are integer-valued and every partial sum is exact in the dtype: the lowering must "
                "not round intermediates (no Winograd), so the result is the exact sum"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "conv2d";
    ConvParams p = conv_params(op, c.attrs, false);
    int64_t want = c.operands.size() > 1 && c.operands[1].rank() == 4 && c.operands[1].shape[1].is_static()
                       ? c.operands[1].shape[1].value() * p.groups
                       : -1;
    auto [C, H, W, kh, kw] = check_conv_operands(op, c.operands, want);
    const TensorType &x = c.operands[0], &w = c.operands[1];
    int64_t O = w.shape[0].value();
    if (C % p.groups != 0 || O % p.groups != 0)
      fail_shape(op, "input channels " + std::to_string(C) + " and output channels " + std::to_string(O) +
                         " must both be divisible by groups " + std::to_string(p.groups));
    if (w.shape[1].value() != C / p.groups)
      fail_shape(op, "weight " + w.to_string() + " must have C/groups = " + std::to_string(C / p.groups) +
                         " input channels (dim 1) for input " + x.to_string());
    check_bias(op, c.operands, O);
    Dim OH = window_out(op, "height", H, p.pad[0], p.pad[2], kh, p.stride[0], p.dilation[0]);
    Dim OW = window_out(op, "width", W, p.pad[1], p.pad[3], kw, p.stride[1], p.dilation[1]);
    return std::vector<TensorType>{TensorType(x.dtype, {x.shape[0], O, OH, OW}, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0], &w = c.operands[1];
    HostTensor out = c.make_result();
    ConvParams p = conv_params("conv2d", c.attrs, false);
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t O = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
    const int64_t OH = out.shape()[2], OW = out.shape()[3], Og = O / p.groups;
    std::vector<double> xv = x.to_f64(), wv = w.to_f64(), bv = bias_values(c, O);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        int64_t c0 = (o / Og) * Cg; // first input channel of o's group
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = 0;
            for (int64_t ic = 0; ic < Cg; ++ic) {
              const double *xc = xv.data() + ((n * C + c0 + ic) * H) * W;
              const double *wc = wv.data() + ((o * Cg + ic) * KH) * KW;
              for (int64_t i = 0; i < KH; ++i) {
                int64_t ih = oh * p.stride[0] - p.pad[0] + i * p.dilation[0];
                if (ih < 0 || ih >= H)
                  continue;
                for (int64_t j = 0; j < KW; ++j) {
                  int64_t iw = ow * p.stride[1] - p.pad[1] + j * p.dilation[1];
                  if (iw >= 0 && iw < W)
                    acc += xc[ih * W + iw] * wc[i * KW + j];
                }
              }
            }
            out.set_f64(((n * O + o) * OH + oh) * OW + ow, acc + bv[o]);
          }
      }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef conv_transpose2d_op() {
  OpDef def;
  def.name = "conv_transpose2d";
  def.traits = OpTrait::window;
  def.summary = "transposed 2-D convolution, x [N,C,H,W], weight [C,O/groups,kh,kw] (+ bias [O])";
  def.min_operands = 2;
  def.max_operands = 3;
  def.attrs = {{"stride", AttrKind::ints, AttrValue(std::vector<int64_t>{1, 1}), "(h, w)"},
               {"padding", AttrKind::ints, AttrValue(std::vector<int64_t>{0, 0, 0, 0}),
                "(top, left, bottom, right), or (h, w) for symmetric; trims the output"},
               {"output_padding", AttrKind::ints, AttrValue(std::vector<int64_t>{0, 0}),
                "(h, w) extra rows/cols at the bottom/right"},
               {"dilation", AttrKind::ints, AttrValue(std::vector<int64_t>{1, 1}), "(h, w)"},
               {"groups", AttrKind::integer, AttrValue(int64_t{1}), "channel groups"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "conv_transpose2d";
    int64_t want = c.operands.size() > 1 && c.operands[1].rank() == 4 && c.operands[1].shape[0].is_static()
                       ? c.operands[1].shape[0].value()
                       : -1;
    auto [C, H, W, kh, kw] = check_conv_operands(op, c.operands, want);
    ConvParams p = conv_params(op, c.attrs, true);
    const TensorType &x = c.operands[0], &w = c.operands[1];
    if (w.shape[0].value() != C)
      fail_shape(op, "weight " + w.to_string() + " must have the input's " + std::to_string(C) +
                         " channels as dim 0 (layout [C_in, O/groups, kh, kw])");
    if (C % p.groups != 0)
      fail_shape(op,
                 "input channels " + std::to_string(C) + " must be divisible by groups " + std::to_string(p.groups));
    int64_t O = w.shape[1].value() * p.groups;
    check_bias(op, c.operands, O);
    // A symbolic H or W: the same polynomial; an output of at least 1 is
    // then a run-time precondition (static ones are checked here).
    Dim OH = (H - Dim(1)) * Dim(p.stride[0]) +
             Dim(-p.pad[0] - p.pad[2] + p.dilation[0] * (kh - 1) + p.output_padding[0] + 1);
    Dim OW = (W - Dim(1)) * Dim(p.stride[1]) +
             Dim(-p.pad[1] - p.pad[3] + p.dilation[1] * (kw - 1) + p.output_padding[1] + 1);
    if ((OH.is_static() && OH.value() < 1) || (OW.is_static() && OW.value() < 1))
      fail_shape(op, "output would be empty (" + OH.to_string() + "x" + OW.to_string() + ") for input " +
                         x.to_string() + ": padding trims more than the output has");
    return std::vector<TensorType>{TensorType(x.dtype, {x.shape[0], O, OH, OW}, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0], &w = c.operands[1];
    HostTensor out = c.make_result();
    ConvParams p = conv_params("conv_transpose2d", c.attrs, true);
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t Og = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
    const int64_t O = Og * p.groups, OH = out.shape()[2], OW = out.shape()[3], Cg = C / p.groups;
    std::vector<double> xv = x.to_f64(), wv = w.to_f64(), bv = bias_values(c, O);
    std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
    // Scatter form: every input pixel adds its kernel-weighted copy into the
    // output at stride spacing; padding trims the borders.
    for (int64_t n = 0; n < N; ++n)
      for (int64_t ci = 0; ci < C; ++ci) {
        int64_t o0 = (ci / Cg) * Og; // first output channel of ci's group
        for (int64_t ih = 0; ih < H; ++ih)
          for (int64_t iw = 0; iw < W; ++iw) {
            double v = xv[((n * C + ci) * H + ih) * W + iw];
            for (int64_t ol = 0; ol < Og; ++ol) {
              double *oc = acc.data() + (n * O + o0 + ol) * OH * OW;
              const double *wc = wv.data() + ((ci * Og + ol) * KH) * KW;
              for (int64_t i = 0; i < KH; ++i) {
                int64_t oh = ih * p.stride[0] - p.pad[0] + i * p.dilation[0];
                if (oh < 0 || oh >= OH)
                  continue;
                for (int64_t j = 0; j < KW; ++j) {
                  int64_t ow = iw * p.stride[1] - p.pad[1] + j * p.dilation[1];
                  if (ow >= 0 && ow < OW)
                    oc[oh * OW + ow] += v * wc[i * KW + j];
                }
              }
            }
          }
      }
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_f64(i, acc[i] + bv[(i / (OH * OW)) % O]);
    return std::vector<HostTensor>{out};
  };
  return def;
}

struct PoolParams {
  std::array<int64_t, 2> kernel, stride;
  std::array<int64_t, 4> pad;
};

PoolParams pool_params(const std::string &op, const Attrs &attrs) {
  PoolParams p;
  p.kernel = pair_attr(op, attrs.get_ints("kernel"), "kernel", 1);
  std::vector<int64_t> stride = attrs.get_ints("stride");
  p.stride = stride.empty() ? p.kernel : pair_attr(op, stride, "stride", 1);
  p.pad = padding_attr(op, attrs);
  // Keeps every window overlapping the input, so no window is all padding.
  for (int i = 0; i < 4; ++i)
    if (p.pad[i] >= p.kernel[i % 2])
      fail_attr(op, "padding " + std::to_string(p.pad[i]) + " must be smaller than the kernel size " +
                        std::to_string(p.kernel[i % 2]) + " of its dim");
  return p;
}

OpDef pool_op(const std::string &name, const std::string &summary, bool is_max) {
  OpDef def;
  def.name = name;
  def.traits = OpTrait::window;
  def.summary = summary;
  def.attrs = {{"kernel", AttrKind::ints, std::nullopt, "window (h, w)"},
               {"stride", AttrKind::ints, AttrValue(std::vector<int64_t>{}), "(h, w); [] = the kernel size"},
               {"padding", AttrKind::ints, AttrValue(std::vector<int64_t>{0, 0, 0, 0}),
                "(top, left, bottom, right), or (h, w) for symmetric"}};
  if (!is_max)
    def.attrs.push_back({"count_include_pad", AttrKind::boolean, AttrValue(false),
                         "divide by the full window size instead of the number of input elements in it"});
  def.infer = [name](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_float(name, x, "input");
    require_rank(name, x, 4, "input");
    const Dim &H = x.shape[2], &W = x.shape[3];
    if ((H.is_static() && H.value() < 1) || (W.is_static() && W.value() < 1))
      fail_shape(name, "input height and width must be non-empty, got " + x.to_string());
    PoolParams p = pool_params(name, c.attrs);
    Dim OH = window_out(name, "height", H, p.pad[0], p.pad[2], p.kernel[0], p.stride[0], 1);
    Dim OW = window_out(name, "width", W, p.pad[1], p.pad[3], p.kernel[1], p.stride[1], 1);
    return std::vector<TensorType>{TensorType(x.dtype, {x.shape[0], x.shape[1], OH, OW}, x.device)};
  };
  def.reference = [name, is_max](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    PoolParams p = pool_params(name, c.attrs);
    bool include_pad = !is_max && c.attrs.get_bool("count_include_pad");
    const int64_t planes = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t OH = out.shape()[2], OW = out.shape()[3];
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          // Padding never wins a max (-inf) and is skipped by the sum.
          double m = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t count = 0;
          for (int64_t i = 0; i < p.kernel[0]; ++i) {
            int64_t ih = oh * p.stride[0] - p.pad[0] + i;
            if (ih < 0 || ih >= H)
              continue;
            for (int64_t j = 0; j < p.kernel[1]; ++j) {
              int64_t iw = ow * p.stride[1] - p.pad[1] + j;
              if (iw < 0 || iw >= W)
                continue;
              double v = x.get_f64((pl * H + ih) * W + iw);
              if (std::isnan(v) || v > m) // NaN propagates, as in max(); once NaN, m stays NaN
                m = v;
              sum += v;
              ++count;
            }
          }
          double divisor = static_cast<double>(include_pad ? p.kernel[0] * p.kernel[1] : count);
          out.set_f64((pl * OH + oh) * OW + ow, is_max ? m : sum / divisor);
        }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef global_avg_pool2d_op() {
  OpDef def;
  def.name = "global_avg_pool2d";
  def.traits = OpTrait::composite;
  def.summary = "mean over H and W of [N,C,H,W], giving [N,C,1,1]";
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    require_float("global_avg_pool2d", x, "input");
    require_rank("global_avg_pool2d", x, 4, "input");
    return std::vector<TensorType>{TensorType(x.dtype, {x.shape[0], x.shape[1], 1, 1}, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    const int64_t plane = x.shape()[2] * x.shape()[3];
    for (int64_t pl = 0; pl < out.numel(); ++pl) {
      double sum = 0;
      for (int64_t j = 0; j < plane; ++j)
        sum += x.get_f64(pl * plane + j);
      out.set_f64(pl, sum / static_cast<double>(plane)); // an empty plane gives NaN, like mean()
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_convolution_ops(OpRegistry &r) {
  r.add(conv2d_op());
  r.add(conv_transpose2d_op());
  r.add(pool_op("max_pool2d", "max over sliding windows of [N,C,H,W] (padding never wins)", true));
  r.add(pool_op("avg_pool2d", "mean over sliding windows of [N,C,H,W]", false));
  r.add(global_avg_pool2d_op());
}

namespace ops {

namespace {
std::vector<Tensor> with_bias(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias) {
  std::vector<Tensor> operands{x, weight};
  if (bias)
    operands.push_back(*bias);
  return operands;
}
} // namespace

Tensor conv2d(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias, const Conv2dOptions &o) {
  Attrs attrs{{"stride", o.stride}, {"padding", o.padding}, {"dilation", o.dilation}, {"groups", o.groups}};
  if (o.exact)
    attrs.set("exact", true);
  return record_op("conv2d", with_bias(x, weight, bias), attrs);
}
Tensor conv_transpose2d(const Tensor &x, const Tensor &weight, const std::optional<Tensor> &bias,
                        const ConvTranspose2dOptions &o) {
  return record_op("conv_transpose2d", with_bias(x, weight, bias),
                   {{"stride", o.stride},
                    {"padding", o.padding},
                    {"output_padding", o.output_padding},
                    {"dilation", o.dilation},
                    {"groups", o.groups}});
}
Tensor max_pool2d(const Tensor &x, const Pool2dOptions &o) {
  return record_op("max_pool2d", {x}, {{"kernel", o.kernel}, {"stride", o.stride}, {"padding", o.padding}});
}
Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &o) {
  return record_op(
      "avg_pool2d", {x},
      {{"kernel", o.kernel}, {"stride", o.stride}, {"padding", o.padding}, {"count_include_pad", o.count_include_pad}});
}
Tensor global_avg_pool2d(const Tensor &x) { return record_op("global_avg_pool2d", {x}); }

} // namespace ops
} // namespace maxc
