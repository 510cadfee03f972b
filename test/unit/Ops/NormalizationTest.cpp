// layer_norm, rms_norm, batch_norm: inference, verifier errors, and
// reference results against naive loops written here (variance computed as
// E[x^2] - E[x]^2, a different formula from the kernel's two-pass one).
#include "TestUtil.h"

using namespace maxc;
using namespace maxc::test;

namespace {

std::vector<Tensor> one(const Tensor &t) { return {t}; }

// Naive layer/rms norm over the last `inner` elements of each row.
HostTensor naive_norm(const HostTensor &x, const HostTensor &w, const HostTensor *b, double eps, bool rms) {
  HostTensor out(x.dtype(), x.shape());
  int64_t inner = w.numel(), rows = x.numel() / inner;
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < inner; ++j) {
      double v = x.get_f64(r * inner + j);
      s += v;
      s2 += v * v;
    }
    double mean = s / inner, var = s2 / inner - mean * mean;
    for (int64_t j = 0; j < inner; ++j) {
      double v = x.get_f64(r * inner + j);
      double y = rms ? v / std::sqrt(s2 / inner + eps) * w.get_f64(j)
                     : (v - mean) / std::sqrt(var + eps) * w.get_f64(j) + (b ? b->get_f64(j) : 0.0);
      out.set_f64(r * inner + j, y);
    }
  }
  return out;
}

} // namespace

TEST_CASE("normalization inference keeps the input type, symbolic dims included", "[ops][normalization]") {
  TensorType x(DType::f32, {Dim("batch"), Dim("seq"), 8}), w(DType::f32, {8});
  CHECK(infer({x, w, w}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], in[2])); })[0].to_string() ==
        "f32[batch,seq,8]");
  CHECK(infer({x, w}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], std::nullopt)); })[0] == x);
  CHECK(infer({x, w}, [](auto &in) { return one(ops::rms_norm(in[0], in[1])); })[0] == x);
  // A weight over two trailing dims, one of them symbolic, matches structurally.
  TensorType w2(DType::f32, {Dim("seq"), 8});
  CHECK(infer({x, w2}, [](auto &in) { return one(ops::rms_norm(in[0], in[1])); })[0] == x);
  TensorType img(DType::f16, {Dim("n"), 3, Dim("h"), Dim("w")}), c(DType::f16, {3});
  CHECK(infer({img, c, c, c, c}, [](auto &in) { return one(ops::batch_norm(in[0], in[1], in[2], in[3], in[4])); })[0] ==
        img);
  TensorType nc(DType::f64, {Dim("n"), 3}), c64(DType::f64, {3});
  CHECK(infer({nc, c64, c64, c64, c64},
              [](auto &in) { return one(ops::batch_norm(in[0], in[1], in[2], in[3], in[4])); })[0] == nc);
}

TEST_CASE("normalization verifier errors", "[ops][normalization]") {
  TensorType x(DType::f32, {2, 3, 8}), w8(DType::f32, {8}), w4(DType::f32, {4}), w38(DType::f32, {3, 8});
  auto ln = [](auto &in) {
    return one(ops::layer_norm(in[0], in[1], in.size() > 2 ? std::optional<Tensor>(in[2]) : std::nullopt));
  };
  auto rms = [](auto &in) { return one(ops::rms_norm(in[0], in[1])); };
  MAXC_REQUIRE_ERROR(infer({x, w4}, ln), ErrorCode::ShapeMismatch, "must equal the trailing dims [8]");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {2, 8})}, rms), ErrorCode::ShapeMismatch, "trailing dims [3,8]");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {})}, rms), ErrorCode::ShapeMismatch, "rank >= 1");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {8}), w38}, ln), ErrorCode::ShapeMismatch, "more dims");
  MAXC_REQUIRE_ERROR(infer({x, w8, w4}, ln), ErrorCode::ShapeMismatch, "bias");
  MAXC_REQUIRE_ERROR(infer({x, w38, w8}, ln), ErrorCode::ShapeMismatch, "weight's shape [3,8]");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f16, {8})}, ln), ErrorCode::DTypeMismatch, "insert a cast");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::i32, {2, 8}), TensorType(DType::i32, {8})}, rms),
                     ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(infer({x, w8}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], std::nullopt, -1.0)); }),
                     ErrorCode::InvalidAttribute, "eps");
  MAXC_REQUIRE_ERROR(infer({x, w8}, [](auto &in) { return one(ops::rms_norm(in[0], in[1], NAN)); }),
                     ErrorCode::InvalidAttribute, "eps must be finite");
  MAXC_REQUIRE_ERROR(infer({x, w8, w8, w8}, [](auto &in) { return one(record_op("layer_norm", in)); }),
                     ErrorCode::OperandCount, "expected 2 to 3 operand(s), got 4");

  TensorType img(DType::f32, {2, 3, 4, 4}), c3(DType::f32, {3}), c4(DType::f32, {4});
  auto bn = [](auto &in) { return one(ops::batch_norm(in[0], in[1], in[2], in[3], in[4])); };
  MAXC_REQUIRE_ERROR(infer({img, c3, c3, c4, c3}, bn), ErrorCode::ShapeMismatch,
                     "mean must be 1-D of the channel count [3]");
  MAXC_REQUIRE_ERROR(infer({img, c3, c3, c3, TensorType(DType::f32, {1, 3})}, bn), ErrorCode::ShapeMismatch, "var");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {3}), c3, c3, c3, c3}, bn), ErrorCode::ShapeMismatch, "rank >= 2");
  MAXC_REQUIRE_ERROR(infer({img, c3, TensorType(DType::f64, {3}), c3, c3}, bn), ErrorCode::DTypeMismatch, "same dtype");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, Dim("c")}), c3, c3, c3, c3}, bn), ErrorCode::ShapeMismatch,
                     "channel count [c]");
}

TEST_CASE("normalization by hand", "[ops][normalization]") {
  HostTensor x = HostTensor::from_f64(DType::f64, {1, 4}, {1, 2, 3, 4});
  HostTensor ones = HostTensor::from_f64(DType::f64, {4}, {1, 1, 1, 1});
  HostTensor y = run1({x, ones}, [](auto &in) { return ops::layer_norm(in[0], in[1], std::nullopt, 0.0); });
  // mean 2.5, variance 1.25 (biased)
  double s = std::sqrt(1.25);
  MAXC_REQUIRE_CLOSE(y, HostTensor::from_f64(DType::f64, {1, 4}, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}), 1e-14, 0);

  HostTensor r = HostTensor::from_f64(DType::f32, {2}, {3, 4});
  HostTensor rw = HostTensor::from_f64(DType::f32, {2}, {1, 2});
  HostTensor ry = run1({r, rw}, [](auto &in) { return ops::rms_norm(in[0], in[1], 0.0); });
  double rms = std::sqrt(12.5);
  MAXC_REQUIRE_CLOSE(ry, HostTensor::from_f64(DType::f32, {2}, {3 / rms, 8 / rms}), 1e-7, 0);

  // Two channels of a 1x2x1x2 image; eps 0 keeps the arithmetic exact.
  HostTensor bx = HostTensor::from_f64(DType::f32, {1, 2, 1, 2}, {1, 2, 3, 4});
  HostTensor scale = HostTensor::from_f64(DType::f32, {2}, {2, 1});
  HostTensor bias = HostTensor::from_f64(DType::f32, {2}, {0.5, -1});
  HostTensor mean = HostTensor::from_f64(DType::f32, {2}, {1, 3});
  HostTensor var = HostTensor::from_f64(DType::f32, {2}, {4, 1});
  HostTensor by = run1({bx, scale, bias, mean, var},
                       [](auto &in) { return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], 0.0); });
  CHECK(by.to_f64() == std::vector<double>{0.5, 1.5, -1, 0});
}

TEST_CASE("layer_norm and rms_norm match naive loops on random inputs", "[ops][normalization]") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    double tol = dtype == DType::bf16 ? 1e-2 : dtype == DType::f32 ? 1e-5 : 1e-10;
    HostTensor x = random_tensor(dtype, {2, 3, 8}, -3, 5);
    for (std::vector<int64_t> wshape : {std::vector<int64_t>{8}, std::vector<int64_t>{3, 8}}) {
      INFO(dtype_name(dtype) << " weight rank " << wshape.size());
      HostTensor w = random_tensor(dtype, wshape, 0.5, 2);
      HostTensor b = random_tensor(dtype, wshape, -1, 1);
      auto outs = run_traced({x, w, b}, [](auto &in) {
        return std::vector<Tensor>{ops::layer_norm(in[0], in[1], in[2]),
                                   ops::layer_norm(in[0], in[1], std::nullopt, 0.1), ops::rms_norm(in[0], in[1]),
                                   ops::rms_norm(in[0], in[1], 0.5)};
      });
      MAXC_REQUIRE_CLOSE(outs[0], naive_norm(x, w, &b, 1e-5, false), tol, tol);
      MAXC_REQUIRE_CLOSE(outs[1], naive_norm(x, w, nullptr, 0.1, false), tol, tol);
      MAXC_REQUIRE_CLOSE(outs[2], naive_norm(x, w, nullptr, 1e-6, true), tol, tol);
      MAXC_REQUIRE_CLOSE(outs[3], naive_norm(x, w, nullptr, 0.5, true), tol, tol);
    }
  }
}

TEST_CASE("batch_norm matches a naive loop on NCHW and NC inputs", "[ops][normalization]") {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{2, 3, 4, 5}, std::vector<int64_t>{4, 3}, std::vector<int64_t>{1, 3, 1, 1, 2}}) {
    HostTensor x = random_tensor(DType::f32, shape);
    HostTensor scale = random_tensor(DType::f32, {3}), bias = random_tensor(DType::f32, {3});
    HostTensor mean = random_tensor(DType::f32, {3}), var = random_tensor(DType::f32, {3}, 0.1, 3);
    HostTensor y = run1({x, scale, bias, mean, var},
                        [](auto &in) { return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], 1e-3); });
    HostTensor expected(DType::f32, shape);
    int64_t inner = x.numel() / (shape[0] * 3);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t ch = (i / inner) % 3;
      expected.set_f64(i, (x.get_f64(i) - mean.get_f64(ch)) / std::sqrt(var.get_f64(ch) + 1e-3) * scale.get_f64(ch) +
                              bias.get_f64(ch));
    }
    MAXC_REQUIRE_CLOSE(y, expected, 1e-6, 1e-6);
  }
}

TEST_CASE("normalization edge shapes: size-1 rows, empty batches, symbolic run", "[ops][normalization]") {
  // Normalising one element: x - mean = 0, so the output is the bias.
  HostTensor x = random_tensor(DType::f32, {5, 1});
  HostTensor w = random_tensor(DType::f32, {1}, 1, 2), b = random_tensor(DType::f32, {1});
  HostTensor y = run1({x, w, b}, [](auto &in) { return ops::layer_norm(in[0], in[1], in[2]); });
  for (int64_t i = 0; i < 5; ++i)
    CHECK(y.get_f64(i) == b.get_f64(0));

  HostTensor e(DType::f32, {0, 4});
  HostTensor w4 = random_tensor(DType::f32, {4});
  auto outs = run_traced({e, w4}, [](auto &in) {
    return std::vector<Tensor>{ops::layer_norm(in[0], in[1], in[1]), ops::rms_norm(in[0], in[1])};
  });
  CHECK(outs[0].shape() == std::vector<int64_t>{0, 4});
  CHECK(outs[1].shape() == std::vector<int64_t>{0, 4});
  HostTensor img(DType::f32, {0, 4, 2, 2});
  HostTensor bn =
      run1({img, w4, w4, w4, w4}, [](auto &in) { return ops::batch_norm(in[0], in[1], in[2], in[3], in[4]); });
  CHECK(bn.shape() == std::vector<int64_t>{0, 4, 2, 2});

  // Symbolic batch bound by the interpreter.
  Graph graph("sym", {TensorType(DType::f32, {Dim("batch"), 4}), TensorType(DType::f32, {4})});
  {
    GraphRealizationContext ctx(graph);
    Tensor in = Tensor::from_graph_value(graph.inputs()[0]), wt = Tensor::from_graph_value(graph.inputs()[1]);
    graph.output({ops::rms_norm(in, wt)});
  }
  HostTensor xs = random_tensor(DType::f32, {3, 4});
  HostTensor got = Interpreter::run(graph, {xs, w4}).at(0);
  MAXC_REQUIRE_CLOSE(got, naive_norm(xs, w4, nullptr, 1e-6, true), 1e-6, 1e-6);
}
