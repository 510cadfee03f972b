// conv2d, conv_transpose2d and pools: inference, verifier errors, and
// reference results against direct loops written here (conv over an
// explicitly padded copy of the input, conv_transpose in gather form).
#include "TestUtil.h"

#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

std::vector<Tensor> one(const Tensor &t) { return {t}; }

struct ConvCase {
  std::vector<int64_t> x, w;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  bool bias;
};

// Direct convolution: zero-pad the input into a new buffer, then slide the
// dilated kernel over it.
HostTensor naive_conv2d(const HostTensor &x, const HostTensor &w, const HostTensor *b, const ConvCase &c) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t O = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  std::vector<int64_t> p =
      c.padding.size() == 2 ? std::vector<int64_t>{c.padding[0], c.padding[1], c.padding[0], c.padding[1]} : c.padding;
  int64_t PH = H + p[0] + p[2], PW = W + p[1] + p[3];
  std::vector<double> padded(N * C * PH * PW, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t ww = 0; ww < W; ++ww)
          padded[((n * C + ch) * PH + h + p[0]) * PW + ww + p[1]] = x.get_f64(((n * C + ch) * H + h) * W + ww);
  int64_t OH = (PH - c.dilation[0] * (KH - 1) - 1) / c.stride[0] + 1;
  int64_t OW = (PW - c.dilation[1] * (KW - 1) - 1) / c.stride[1] + 1;
  HostTensor out(x.dtype(), {N, O, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b ? b->get_f64(o) : 0.0;
          int64_t g = o / (O / c.groups);
          for (int64_t ic = 0; ic < Cg; ++ic)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j)
                acc += padded[((n * C + g * Cg + ic) * PH + oh * c.stride[0] + i * c.dilation[0]) * PW +
                              ow * c.stride[1] + j * c.dilation[1]] *
                       w.get_f64(((o * Cg + ic) * KH + i) * KW + j);
          out.set_f64(((n * O + o) * OH + oh) * OW + ow, acc);
        }
  return out;
}

struct ConvTCase {
  std::vector<int64_t> x, w;
  std::vector<int64_t> stride, padding, output_padding, dilation;
  int64_t groups;
  bool bias;
};

// Transposed convolution in gather form: output pixel (oh, ow) receives
// input pixel (ih, iw) through kernel tap (i, j) when ih*s - pad + i*d == oh.
HostTensor naive_conv_transpose2d(const HostTensor &x, const HostTensor &w, const HostTensor *b, const ConvTCase &c) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t Og = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3], O = Og * c.groups, Cg = C / c.groups;
  const auto &p = c.padding;
  int64_t OH = (H - 1) * c.stride[0] - p[0] - p[2] + c.dilation[0] * (KH - 1) + c.output_padding[0] + 1;
  int64_t OW = (W - 1) * c.stride[1] - p[1] - p[3] + c.dilation[1] * (KW - 1) + c.output_padding[1] + 1;
  HostTensor out(x.dtype(), {N, O, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b ? b->get_f64(o) : 0.0;
          int64_t g = o / Og, ol = o % Og;
          for (int64_t ic = 0; ic < Cg; ++ic)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                int64_t nh = oh + p[0] - i * c.dilation[0], nw = ow + p[1] - j * c.dilation[1];
                if (nh < 0 || nw < 0 || nh % c.stride[0] || nw % c.stride[1])
                  continue;
                int64_t ih = nh / c.stride[0], iw = nw / c.stride[1];
                if (ih >= H || iw >= W)
                  continue;
                int64_t ch = g * Cg + ic;
                acc += x.get_f64(((n * C + ch) * H + ih) * W + iw) * w.get_f64(((ch * Og + ol) * KH + i) * KW + j);
              }
          out.set_f64(((n * O + o) * OH + oh) * OW + ow, acc);
        }
  return out;
}

// Pools over an explicitly padded grid where padding cells are marked absent.
HostTensor naive_pool(const HostTensor &x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                      bool is_max, bool include_pad) {
  if (s.empty())
    s = k;
  if (p.size() == 2)
    p = {p[0], p[1], p[0], p[1]};
  int64_t NC = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t PH = H + p[0] + p[2], PW = W + p[1] + p[3];
  int64_t OH = (PH - k[0]) / s[0] + 1, OW = (PW - k[1]) / s[1] + 1;
  HostTensor out(x.dtype(), {x.shape()[0], x.shape()[1], OH, OW});
  for (int64_t pl = 0; pl < NC; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t present = 0;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t ph = oh * s[0] + i, pw = ow * s[1] + j; // padded coordinates
            bool inside = ph >= p[0] && ph < p[0] + H && pw >= p[1] && pw < p[1] + W;
            if (!inside)
              continue;
            double v = x.get_f64((pl * H + ph - p[0]) * W + pw - p[1]);
            best = std::max(best, v);
            sum += v;
            ++present;
          }
        out.set_f64((pl * OH + oh) * OW + ow, is_max ? best : sum / (include_pad ? k[0] * k[1] : present));
      }
  return out;
}

Tensor conv(const std::vector<Tensor> &in, const ConvCase &c) {
  ops::Conv2dOptions o;
  o.stride = c.stride;
  o.padding = c.padding;
  o.dilation = c.dilation;
  o.groups = c.groups;
  return ops::conv2d(in[0], in[1], c.bias ? std::optional<Tensor>(in[2]) : std::nullopt, o);
}

ops::Conv2dOptions conv_opts(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                             int64_t groups) {
  ops::Conv2dOptions o;
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.dilation = std::move(dilation);
  o.groups = groups;
  return o;
}

ops::Pool2dOptions pool_opts(std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                             std::vector<int64_t> padding = {0, 0, 0, 0}, bool include_pad = false) {
  ops::Pool2dOptions o;
  o.kernel = std::move(kernel);
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.count_include_pad = include_pad;
  return o;
}

} // namespace

TEST_CASE("conv and pool inference", "[ops][convolution]") {
  auto type = [](std::vector<TensorType> types, std::function<Tensor(const std::vector<Tensor> &)> f) {
    return infer(types, [f](auto &in) { return one(f(in)); }).at(0).to_string();
  };
  TensorType x(DType::f32, {Dim("batch"), 3, 32, 32}), w(DType::f32, {8, 3, 3, 3}), b(DType::f32, {8});
  CHECK(type({x, w, b}, [](auto &in) {
          return ops::conv2d(in[0], in[1], in[2], conv_opts({1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
        }) == "f32[batch,8,32,32]");
  CHECK(type({x, w}, [](auto &in) { return ops::conv2d(in[0], in[1]); }) == "f32[batch,8,30,30]");
  CHECK(type({x, w}, [](auto &in) {
          return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({2, 2}, {1, 1}, {1, 1}, 1));
        }) == "f32[batch,8,16,16]");
  // stride 2, asymmetric padding, dilation 2 (span 5): H (10+2+1-5)/2+1 = 5, W (7+0+1-5)/2+1 = 2.
  TensorType x2(DType::f64, {2, 3, 10, 7}), w2(DType::f64, {4, 3, 3, 3});
  CHECK(type({x2, w2}, [](auto &in) {
          return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({2, 2}, {2, 0, 1, 1}, {2, 2}, 1));
        }) == "f64[2,4,5,2]");
  TensorType xg(DType::f32, {1, 4, 5, 5});
  CHECK(type({xg, TensorType(DType::f32, {6, 2, 3, 3})}, [](auto &in) {
          return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({1, 1}, {0, 0}, {1, 1}, 2));
        }) == "f32[1,6,3,3]");
  CHECK(type({xg, TensorType(DType::f32, {4, 1, 3, 3})}, [](auto &in) {
          return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({1, 1}, {1, 1}, {1, 1}, 4));
        }) == "f32[1,4,5,5]");

  TensorType xt(DType::f32, {Dim("batch"), 4, 5, 5}), wt(DType::f32, {4, 3, 3, 3});
  ops::ConvTranspose2dOptions t;
  t.stride = {2, 2};
  t.padding = {1, 1, 1, 1};
  t.output_padding = {1, 1};
  // (5-1)*2 - 2 + 2 + 1 + 1 = 10
  CHECK(type({xt, wt}, [t](auto &in) { return ops::conv_transpose2d(in[0], in[1], std::nullopt, t); }) ==
        "f32[batch,3,10,10]");
  ops::ConvTranspose2dOptions tg;
  tg.groups = 2;
  CHECK(type({xt, wt, TensorType(DType::f32, {6})},
             [tg](auto &in) { return ops::conv_transpose2d(in[0], in[1], in[2], tg); }) == "f32[batch,6,7,7]");

  // Symbolic H and W: the same rules in Dim arithmetic.
  TensorType xs(DType::f32, {1, 3, Dim("h"), Dim("w")});
  CHECK(type({xs, w}, [](auto &in) { return ops::conv2d(in[0], in[1]); }) == "f32[1,8,h-2,w-2]");
  CHECK(type({xs, w}, [](auto &in) {
          return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({2, 2}, {1, 1}, {1, 1}, 1));
        }) == "f32[1,8,floordiv(h+1,2),floordiv(w+1,2)]");
  CHECK(type({xs}, [](auto &in) { return ops::max_pool2d(in[0]); }) == "f32[1,3,floordiv(h,2),floordiv(w,2)]");
  CHECK(type({xs}, [](auto &in) { return ops::avg_pool2d(in[0], pool_opts({2, 2}, {1, 1})); }) ==
        "f32[1,3,h-1,w-1]");
  CHECK(type({TensorType(DType::f32, {1, 4, Dim("h"), Dim("w")}), wt}, [t](auto &in) {
          return ops::conv_transpose2d(in[0], in[1], std::nullopt, t);
        }) == "f32[1,3,2*h,2*w]");

  TensorType xp(DType::f32, {Dim("n"), Dim("c"), 8, 8});
  CHECK(type({xp}, [](auto &in) { return ops::max_pool2d(in[0]); }) == "f32[n,c,4,4]");
  CHECK(type({xp}, [](auto &in) {
          return ops::max_pool2d(in[0], pool_opts({3, 3}, {2, 2}, {1, 1}));
        }) == "f32[n,c,4,4]");
  CHECK(type({xp}, [](auto &in) { return ops::avg_pool2d(in[0], pool_opts({2, 3}, {1, 1})); }) == "f32[n,c,7,6]");
  CHECK(type({TensorType(DType::bf16, {Dim("n"), 3, Dim("h"), Dim("w")})},
             [](auto &in) { return ops::global_avg_pool2d(in[0]); }) == "bf16[n,3,1,1]");
}

TEST_CASE("conv and pool verifier errors", "[ops][convolution]") {
  TensorType x(DType::f32, {1, 4, 8, 8}), w(DType::f32, {6, 4, 3, 3});
  auto conv_with = [](ops::Conv2dOptions o) {
    return [o](auto &in) {
      return one(ops::conv2d(in[0], in[1], in.size() > 2 ? std::optional<Tensor>(in[2]) : std::nullopt, o));
    };
  };
  ops::Conv2dOptions d;
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {4, 8, 8}), w}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "input must have rank 4");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {6, 4, 3})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "weight must have rank 4");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::i32, {1, 4, 8, 8}), TensorType(DType::i32, {6, 4, 3, 3})}, conv_with(d)),
                     ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f16, {6, 4, 3, 3})}, conv_with(d)), ErrorCode::DTypeMismatch,
                     "insert a cast");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {1, Dim("c"), 8, 8}), w}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "input channels (dim 1) must be static, got f32[1,c,8,8]; the model fixes it at 4: pin it with "
                     "--dim c=4");
  ops::Conv2dOptions g2;
  g2.groups = 2;
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {1, Dim("c"), 8, 8}), TensorType(DType::f32, {6, 2, 3, 3})},
                           conv_with(g2)),
                     ErrorCode::ShapeMismatch, "fixes it at 4: pin it with --dim c=4"); // 2 per group
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {Dim("o"), 4, 3, 3})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "weight must have a static shape");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {6, 2, 3, 3})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "C/groups = 4");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, 0}, {1, 1}, 3))), ErrorCode::ShapeMismatch,
                     "divisible by groups 3");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {5, 2, 3, 3})}, conv_with(conv_opts({1, 1}, {0, 0}, {1, 1}, 2))),
                     ErrorCode::ShapeMismatch, "output channels 5");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {6, 4, 9, 3})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "height window (9) is larger than the padded height");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, 0}, {4, 1}, 1))), ErrorCode::ShapeMismatch,
                     "window (9)");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {6, 4, 0, 3})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "kernel must be non-empty");
  MAXC_REQUIRE_ERROR(infer({x, w, TensorType(DType::f32, {4})}, conv_with(d)), ErrorCode::ShapeMismatch,
                     "bias must be 1-D of the output channels [6]");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({0, 1}, {0, 0}, {1, 1}, 1))), ErrorCode::InvalidAttribute,
                     "stride values must be >= 1");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1}, {0, 0}, {1, 1}, 1))), ErrorCode::InvalidAttribute,
                     "stride must have 2 values");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, 0, 0}, {1, 1}, 1))), ErrorCode::InvalidAttribute,
                     "padding must have 4 values");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, -1}, {1, 1}, 1))), ErrorCode::InvalidAttribute,
                     "padding values must be >= 0");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, 0}, {0, 1}, 1))), ErrorCode::InvalidAttribute,
                     "dilation values must be >= 1");
  MAXC_REQUIRE_ERROR(infer({x, w}, conv_with(conv_opts({1, 1}, {0, 0}, {1, 1}, 0))), ErrorCode::InvalidAttribute,
                     "groups must be >= 1");

  auto convt_with = [](ops::ConvTranspose2dOptions o) {
    return [o](auto &in) { return one(ops::conv_transpose2d(in[0], in[1], std::nullopt, o)); };
  };
  ops::ConvTranspose2dOptions t;
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {3, 4, 3, 3})}, convt_with(t)), ErrorCode::ShapeMismatch,
                     "must have the input's 4 channels as dim 0");
  ops::ConvTranspose2dOptions top = t;
  top.output_padding = {1, 0};
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {4, 2, 3, 3})}, convt_with(top)), ErrorCode::InvalidAttribute,
                     "output_padding 1 must be smaller than the stride or the dilation");
  ops::ConvTranspose2dOptions tg = t;
  tg.groups = 3;
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {4, 2, 3, 3})}, convt_with(tg)), ErrorCode::ShapeMismatch,
                     "divisible by groups 3");
  ops::ConvTranspose2dOptions tp = t;
  tp.padding = {1, 1, 1, 1};
  MAXC_REQUIRE_ERROR(
      infer({TensorType(DType::f32, {1, 4, 1, 1}), TensorType(DType::f32, {4, 2, 1, 1})}, convt_with(tp)),
      ErrorCode::ShapeMismatch, "output would be empty");

  auto pool = [](bool is_max, ops::Pool2dOptions o) {
    return [is_max, o](auto &in) { return one(is_max ? ops::max_pool2d(in[0], o) : ops::avg_pool2d(in[0], o)); };
  };
  MAXC_REQUIRE_ERROR(infer({x}, pool(true, pool_opts({3, 3}, {}, {3, 0}))), ErrorCode::InvalidAttribute,
                     "padding 3 must be smaller than the kernel size 3");
  MAXC_REQUIRE_ERROR(infer({x}, pool(false, pool_opts({9, 1}))), ErrorCode::ShapeMismatch, "height window (9)");
  MAXC_REQUIRE_ERROR(infer({x}, pool(false, pool_opts({2, 2, 2}))), ErrorCode::InvalidAttribute,
                     "kernel must have 2 values");
  MAXC_REQUIRE_ERROR(infer({x}, pool(true, pool_opts({2, 2}, {0, 1}))), ErrorCode::InvalidAttribute,
                     "stride values must be >= 1");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {1, 4, 0, 8})}, pool(true, pool_opts({1, 1}))),
                     ErrorCode::ShapeMismatch, "non-empty");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::i64, {1, 4, 8, 8})}, pool(false, pool_opts({2, 2}))),
                     ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(infer({x}, [](auto &in) { return one(record_op("max_pool2d", in)); }), ErrorCode::InvalidAttribute,
                     "missing required attribute 'kernel'");
  MAXC_REQUIRE_ERROR(
      infer({x},
            [](auto &in) {
              return one(
                  record_op("max_pool2d", in, {{"kernel", std::vector<int64_t>{2, 2}}, {"count_include_pad", true}}));
            }),
      ErrorCode::UnknownAttribute, "count_include_pad");
  MAXC_REQUIRE_ERROR(
      infer({TensorType(DType::f32, {4, 8, 8})}, [](auto &in) { return one(ops::global_avg_pool2d(in[0])); }),
      ErrorCode::ShapeMismatch, "rank 4");
}

TEST_CASE("conv and pools by hand", "[ops][convolution]") {
  std::vector<double> v16(16);
  for (int i = 0; i < 16; ++i)
    v16[i] = i + 1;
  HostTensor x = HostTensor::from_f64(DType::f32, {1, 1, 4, 4}, v16);
  HostTensor ones = HostTensor::from_f64(DType::f32, {1, 1, 3, 3}, std::vector<double>(9, 1.0));
  HostTensor bias = HostTensor::from_f64(DType::f32, {1}, {0.5});
  HostTensor centre = HostTensor::from_f64(DType::f32, {1, 1, 3, 3}, {0, 0, 0, 0, 1, 0, 0, 0, 0});
  auto outs = run_traced({x, ones, bias, centre}, [](auto &in) {
    return std::vector<Tensor>{ops::conv2d(in[0], in[1]),
                               ops::conv2d(in[0], in[1], in[2], conv_opts({1, 1}, {1, 1}, {1, 1}, 1)),
                               ops::conv2d(in[0], in[3], std::nullopt, conv_opts({1, 1}, {1, 1, 1, 1}, {1, 1}, 1))};
  });
  // 3x3 window sums of 1..16: 1+2+3+5+6+7+9+10+11 = 54, then +9 per column step, +36 per row step.
  CHECK(outs[0].shape() == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(outs[0].to_f64() == std::vector<double>{54, 63, 90, 99});
  // With padding 1: the corner sees 1+2+5+6 = 14; the top edge 1+2+3+5+6+7 = 24.
  CHECK(outs[1].shape() == std::vector<int64_t>{1, 1, 4, 4});
  CHECK(outs[1].get_f64(0) == 14.5);
  CHECK(outs[1].get_f64(1) == 24.5);
  CHECK(outs[1].get_f64(5) == 54.5);
  CHECK(outs[1].get_f64(15) == 11 + 12 + 15 + 16 + 0.5);
  // The centre-tap kernel with padding 1 is the identity.
  CHECK(outs[2].identical(x));

  // Transposed conv of [[1,2],[3,4]] with a 2x2 ones kernel.
  HostTensor tx = HostTensor::from_f64(DType::f64, {1, 1, 2, 2}, {1, 2, 3, 4});
  HostTensor tw = HostTensor::from_f64(DType::f64, {1, 1, 2, 2}, {1, 1, 1, 1});
  ops::ConvTranspose2dOptions s2;
  s2.stride = {2, 2};
  auto touts = run_traced({tx, tw}, [s2](auto &in) {
    return std::vector<Tensor>{ops::conv_transpose2d(in[0], in[1]),
                               ops::conv_transpose2d(in[0], in[1], std::nullopt, s2)};
  });
  CHECK(touts[0].to_f64() == std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4});
  CHECK(touts[1].to_f64() == std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});

  auto pouts = run_traced({x}, [](auto &in) {
    return std::vector<Tensor>{ops::max_pool2d(in[0]),
                               ops::avg_pool2d(in[0]),
                               ops::avg_pool2d(in[0], pool_opts({2, 2}, {2, 2}, {1, 1})),
                               ops::avg_pool2d(in[0], pool_opts({2, 2}, {2, 2}, {1, 1}, true)),
                               ops::max_pool2d(in[0], pool_opts({3, 3}, {1, 1}, {1, 1})),
                               ops::global_avg_pool2d(in[0])};
  });
  CHECK(pouts[0].to_f64() == std::vector<double>{6, 8, 14, 16});
  CHECK(pouts[1].to_f64() == std::vector<double>{3.5, 5.5, 11.5, 13.5});
  // Padded 2x2 windows at stride 2: the corners hold one element, edges two.
  CHECK(pouts[2].to_f64() == std::vector<double>{1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16});
  CHECK(pouts[3].to_f64() == std::vector<double>{0.25, 1.25, 1, 3.5, 8.5, 5, 3.25, 7.25, 4});
  CHECK(pouts[4].to_f64() == std::vector<double>{6, 7, 8, 8, 10, 11, 12, 12, 14, 15, 16, 16, 14, 15, 16, 16});
  CHECK(pouts[5].shape() == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(pouts[5].get_f64(0) == 8.5);
}

TEST_CASE("conv2d matches a direct loop: stride, padding, dilation, groups, depthwise", "[ops][convolution]") {
  std::vector<ConvCase> cases = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 3, 11, 9}, {2, 3, 3, 3}, {2, 2}, {2, 0, 1, 3}, {2, 2}, 1, true}, // stride 2 + padding + dilation 2
      {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false}, // groups = 2
      {{1, 4, 7, 6}, {4, 1, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 4, true},        // depthwise, 2-value padding
      {{1, 4, 7, 6}, {8, 1, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 4, false},       // depthwise, multiplier 2
      {{3, 5, 4, 4}, {2, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},  // 1x1 conv
      {{1, 2, 1, 1}, {3, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},  // size-1 spatial dims
      {{1, 1, 1, 1}, {1, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false}, // all padding but the centre
      {{1, 2, 9, 9}, {2, 2, 2, 3}, {3, 2}, {0, 1, 2, 0}, {3, 2}, 1, true},
  };
  for (DType dtype : {DType::f32, DType::f64}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const ConvCase &c = cases[i];
      INFO(dtype_name(dtype) << " case " << i);
      HostTensor x = random_tensor(dtype, c.x), w = random_tensor(dtype, c.w), b = random_tensor(dtype, {c.w[0]});
      std::vector<HostTensor> inputs = {x, w};
      if (c.bias)
        inputs.push_back(b);
      HostTensor y = run1(inputs, [&](auto &in) { return conv(in, c); });
      MAXC_REQUIRE_CLOSE(y, naive_conv2d(x, w, c.bias ? &b : nullptr, c), 1e-6, 1e-6);
    }
  }
}

TEST_CASE("conv_transpose2d matches a gather-form loop", "[ops][convolution]") {
  std::vector<ConvTCase> cases = {
      {{2, 3, 4, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 1, true},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true},  // the usual 2x upsample
      {{1, 2, 3, 4}, {2, 2, 3, 2}, {2, 3}, {0, 1, 2, 0}, {1, 2}, {2, 1}, 1, false}, // asymmetric everything
      {{2, 4, 3, 3}, {4, 3, 2, 2}, {2, 2}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 2, true},  // groups = 2
      {{1, 3, 4, 4}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0, 0}, {2, 2}, 3, false}, // depthwise, dilation 2
      {{1, 2, 1, 1}, {2, 3, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 1, true},  // 1x1
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const ConvTCase &c = cases[i];
    INFO("case " << i);
    HostTensor x = random_tensor(DType::f32, c.x), w = random_tensor(DType::f32, c.w);
    HostTensor b = random_tensor(DType::f32, {c.w[1] * c.groups});
    std::vector<HostTensor> inputs = {x, w};
    if (c.bias)
      inputs.push_back(b);
    HostTensor y = run1(inputs, [&](auto &in) {
      ops::ConvTranspose2dOptions o;
      o.stride = c.stride;
      o.padding = c.padding;
      o.output_padding = c.output_padding;
      o.dilation = c.dilation;
      o.groups = c.groups;
      return ops::conv_transpose2d(in[0], in[1], c.bias ? std::optional<Tensor>(in[2]) : std::nullopt, o);
    });
    MAXC_REQUIRE_CLOSE(y, naive_conv_transpose2d(x, w, c.bias ? &b : nullptr, c), 1e-6, 1e-6);
  }
}

TEST_CASE("pools match a direct loop on random inputs", "[ops][convolution]") {
  struct PoolCase {
    std::vector<int64_t> kernel, stride, padding;
  };
  std::vector<PoolCase> cases = {
      {{2, 2}, {}, {0, 0, 0, 0}}, {{3, 3}, {2, 2}, {1, 1, 1, 1}}, {{3, 2}, {1, 2}, {2, 0, 0, 1}},
      {{1, 1}, {1, 1}, {0, 0}},   {{5, 7}, {}, {0, 0}},           {{2, 3}, {3, 1}, {1, 2}},
  };
  for (DType dtype : {DType::f32, DType::f64}) {
    HostTensor x = random_tensor(dtype, {2, 3, 5, 7});
    for (size_t i = 0; i < cases.size(); ++i) {
      const PoolCase &c = cases[i];
      INFO(dtype_name(dtype) << " case " << i);
      auto outs = run_traced({x}, [&](auto &in) {
        return std::vector<Tensor>{ops::max_pool2d(in[0], pool_opts(c.kernel, c.stride, c.padding)),
                                   ops::avg_pool2d(in[0], pool_opts(c.kernel, c.stride, c.padding)),
                                   ops::avg_pool2d(in[0], pool_opts(c.kernel, c.stride, c.padding, true))};
      });
      MAXC_REQUIRE_CLOSE(outs[0], naive_pool(x, c.kernel, c.stride, c.padding, true, false), 0, 0);
      MAXC_REQUIRE_CLOSE(outs[1], naive_pool(x, c.kernel, c.stride, c.padding, false, false), 1e-6, 1e-7);
      MAXC_REQUIRE_CLOSE(outs[2], naive_pool(x, c.kernel, c.stride, c.padding, false, true), 1e-6, 1e-7);
    }
    HostTensor g = run1({x}, [](auto &in) { return ops::global_avg_pool2d(in[0]); });
    MAXC_REQUIRE_CLOSE(g, naive_pool(x, {5, 7}, {}, {0, 0}, false, false), 1e-6, 1e-7);
  }
}

TEST_CASE("max pool propagates NaN and never picks padding", "[ops][convolution]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor x = HostTensor::from_f64(DType::f32, {1, 1, 2, 2}, {-5, nan, -7, -8});
  HostTensor y = run1({x}, [](auto &in) { return ops::max_pool2d(in[0], pool_opts({2, 2}, {1, 1}, {1, 1})); });
  // Windows over the padded 4x4 grid; padding is -inf, so all-negative inputs stay negative.
  CHECK(y.shape() == std::vector<int64_t>{1, 1, 3, 3});
  CHECK(y.get_f64(0) == -5);
  CHECK(std::isnan(y.get_f64(1)));
  CHECK(std::isnan(y.get_f64(4)));
  CHECK(y.get_f64(6) == -7);
  CHECK(y.get_f64(8) == -8);
}

TEST_CASE("conv and pools: empty and symbolic batches", "[ops][convolution]") {
  HostTensor x(DType::f32, {0, 3, 5, 5});
  HostTensor w = random_tensor(DType::f32, {2, 3, 3, 3});
  auto outs = run_traced({x, w}, [](auto &in) {
    return std::vector<Tensor>{ops::conv2d(in[0], in[1]), ops::max_pool2d(in[0]), ops::global_avg_pool2d(in[0])};
  });
  CHECK(outs[0].shape() == std::vector<int64_t>{0, 2, 3, 3});
  CHECK(outs[1].shape() == std::vector<int64_t>{0, 3, 2, 2});
  CHECK(outs[2].shape() == std::vector<int64_t>{0, 3, 1, 1});
  // Zero input channels: every output is the bias.
  HostTensor x0(DType::f32, {1, 0, 2, 2}), w0(DType::f32, {2, 0, 1, 1});
  HostTensor b0 = HostTensor::from_f64(DType::f32, {2}, {1.5, -1});
  CHECK(run1({x0, w0, b0}, [](auto &in) { return ops::conv2d(in[0], in[1], in[2]); }).to_f64() ==
        std::vector<double>{1.5, 1.5, 1.5, 1.5, -1, -1, -1, -1});

  Graph graph("sym", {TensorType(DType::f32, {Dim("batch"), 3, 5, 5}), TensorType(DType::f32, {2, 3, 3, 3})});
  ConvCase c{{3, 3, 5, 5}, {2, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false};
  {
    GraphRealizationContext ctx(graph);
    std::vector<Tensor> in = {Tensor::from_graph_value(graph.inputs()[0]), Tensor::from_graph_value(graph.inputs()[1])};
    Tensor y = conv(in, c);
    CHECK(y.type().to_string() == "f32[batch,2,3,3]");
    graph.output({y});
  }
  HostTensor xs = random_tensor(DType::f32, {3, 3, 5, 5});
  MAXC_REQUIRE_CLOSE(Interpreter::run(graph, {xs, w}).at(0), naive_conv2d(xs, w, nullptr, c), 1e-6, 1e-6);
}

TEST_CASE("a ResNet-sized conv runs on the interpreter", "[ops][convolution]") {
  // 1x64x28x28 with 64 3x3 filters: 29M multiply-adds, run twice (graph + eager).
  HostTensor x = random_tensor(DType::f32, {1, 64, 28, 28}), w = random_tensor(DType::f32, {64, 64, 3, 3});
  HostTensor y = run1({x, w}, [](auto &in) {
    return ops::conv2d(in[0], in[1], std::nullopt, conv_opts({1, 1}, {1, 1}, {1, 1}, 1));
  });
  CHECK(y.shape() == std::vector<int64_t>{1, 64, 28, 28});
}
