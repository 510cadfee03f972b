// matmul and linear: inference (broadcast batch dims, transposes, symbolic
// dims), verifier errors, and reference results against explicit loops.
#include "TestUtil.h"


using namespace maxc;
using namespace maxc::test;

namespace {

std::vector<Tensor> one(const Tensor &t) { return {t}; }

// Naive batched matmul with NumPy batch broadcasting and transposes, written
// with explicit multi-indices (independent of the kernel's packing).
HostTensor naive_matmul(const HostTensor &a, const HostTensor &b, bool ta, bool tb) {
  const auto &as = a.shape(), &bs = b.shape();
  size_t ra = as.size(), rb = bs.size(), rank = std::max(ra, rb);
  int64_t M = ta ? as[ra - 1] : as[ra - 2], K = ta ? as[ra - 2] : as[ra - 1];
  int64_t N = tb ? bs[rb - 2] : bs[rb - 1];
  std::vector<int64_t> batch(rank - 2);
  for (size_t d = 0; d < rank - 2; ++d) {
    // Right-aligned batch dims; a missing dim counts as 1.
    int64_t da = d + ra >= rank ? as[d + ra - rank] : 1, db = d + rb >= rank ? bs[d + rb - rank] : 1;
    batch[d] = da == 1 ? db : da;
  }
  std::vector<int64_t> oshape = batch;
  oshape.push_back(M);
  oshape.push_back(N);
  HostTensor out(a.dtype(), oshape);
  int64_t nb = 1;
  for (int64_t d : batch)
    nb *= d;
  // Linear offset of batch index `bi` in operand shape `s` (broadcast dims use index 0).
  auto batch_offset = [&](const std::vector<int64_t> &s, int64_t bi) {
    size_t r = s.size();
    int64_t off = 0, stride = s[r - 1] * s[r - 2];
    for (int64_t d = static_cast<int64_t>(rank) - 3; d >= 0; --d) {
      int64_t idx = bi % batch[d];
      bi /= batch[d];
      int64_t sd = d + static_cast<int64_t>(r) - static_cast<int64_t>(rank);
      if (sd >= 0) {
        off += (s[sd] == 1 ? 0 : idx) * stride;
        stride *= s[sd];
      }
    }
    return off;
  };
  bool integral = !is_float(a.dtype());
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t oa = batch_offset(as, bi), ob = batch_offset(bs, bi);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        int64_t iacc = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t ia = oa + (ta ? k * M + i : i * K + k), ib = ob + (tb ? j * K + k : k * N + j);
          acc += a.get_f64(ia) * b.get_f64(ib);
          iacc += a.get_i64(ia) * b.get_i64(ib);
        }
        if (integral)
          out.set_i64((bi * M + i) * N + j, iacc);
        else
          out.set_f64((bi * M + i) * N + j, acc);
      }
  }
  return out;
}

HostTensor naive_linear(const HostTensor &x, const HostTensor &w, const HostTensor *b) {
  int64_t in = w.shape()[1], out_f = w.shape()[0], rows = x.numel() / in;
  std::vector<int64_t> shape = x.shape();
  shape.back() = out_f;
  HostTensor y(x.dtype(), shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k)
        acc += x.get_f64(r * in + k) * w.get_f64(o * in + k);
      y.set_f64(r * out_f + o, acc + (b ? b->get_f64(o) : 0.0));
    }
  return y;
}

} // namespace

TEST_CASE("matmul and linear inference", "[ops][linalg]") {
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor> &in) { return one(ops::matmul(in[0], in[1], ta, tb)); };
  };
  auto type = [](std::vector<TensorType> types, auto f) { return infer(types, f).at(0).to_string(); };
  CHECK(type({TensorType(DType::f32, {2, 3}), TensorType(DType::f32, {3, 4})}, mm(false, false)) == "f32[2,4]");
  CHECK(type({TensorType(DType::f32, {Dim("batch"), 1, 3, 4}), TensorType(DType::f32, {5, 4, 2})}, mm(false, false)) ==
        "f32[batch,5,3,2]");
  CHECK(type({TensorType(DType::f32, {7, 4, 3}), TensorType(DType::f32, {4, 2})}, mm(true, false)) == "f32[7,3,2]");
  CHECK(type({TensorType(DType::f32, {3, 4}), TensorType(DType::f32, {2, 4})}, mm(false, true)) == "f32[3,2]");
  CHECK(type({TensorType(DType::f32, {4, 3}), TensorType(DType::f32, {6, 2, 4})}, mm(true, true)) == "f32[6,3,2]");
  CHECK(type({TensorType(DType::i32, {Dim("m"), Dim("k")}), TensorType(DType::i32, {Dim("k"), Dim("n")})},
             mm(false, false)) == "i32[m,n]");
  CHECK(type({TensorType(DType::bf16, {Dim("b"), Dim("h"), Dim("s"), 64}),
              TensorType(DType::bf16, {Dim("b"), Dim("h"), Dim("s"), 64})},
             mm(false, true)) == "bf16[b,h,s,s]");

  auto lin = [](const std::vector<Tensor> &in) {
    return one(ops::linear(in[0], in[1], in.size() > 2 ? std::optional<Tensor>(in[2]) : std::nullopt));
  };
  TensorType w(DType::f32, {32, 16}), b(DType::f32, {32});
  CHECK(type({TensorType(DType::f32, {Dim("batch"), Dim("seq"), 16}), w, b}, lin) == "f32[batch,seq,32]");
  CHECK(type({TensorType(DType::f32, {16}), w}, lin) == "f32[32]");
  CHECK(type({TensorType(DType::f32, {2, Dim("d")}), TensorType(DType::f32, {Dim("o"), Dim("d")})}, lin) == "f32[2,o]");
}

TEST_CASE("matmul and linear verifier errors", "[ops][linalg]") {
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor> &in) { return one(ops::matmul(in[0], in[1], ta, tb)); };
  };
  TensorType a23(DType::f32, {2, 3}), b43(DType::f32, {4, 3});
  MAXC_REQUIRE_ERROR(infer({a23, b43}, mm(false, false)), ErrorCode::ShapeMismatch,
                     "contraction dims differ: lhs f32[2,3] has K=3, rhs f32[4,3] has K=4");
  MAXC_REQUIRE_ERROR(infer({a23, b43}, mm(true, true)), ErrorCode::ShapeMismatch, "(transposed) has K=2");
  MAXC_REQUIRE_ERROR(
      infer({TensorType(DType::f32, {2, Dim("k")}), TensorType(DType::f32, {Dim("j"), 3})}, mm(false, false)),
      ErrorCode::ShapeMismatch, "K=k");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {3}), TensorType(DType::f32, {3, 2})}, mm(false, false)),
                     ErrorCode::ShapeMismatch, "lhs must have rank >= 2");
  MAXC_REQUIRE_ERROR(infer({a23, TensorType(DType::f32, {3})}, mm(false, false)), ErrorCode::ShapeMismatch,
                     "rhs must have rank >= 2");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 2, 3}), TensorType(DType::f32, {3, 3, 4})}, mm(false, false)),
                     ErrorCode::ShapeMismatch, "batch dims: cannot broadcast");
  MAXC_REQUIRE_ERROR(infer({a23, TensorType(DType::f64, {3, 2})}, mm(false, false)), ErrorCode::DTypeMismatch,
                     "insert a cast");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::boolean, {2, 2}), TensorType(DType::boolean, {2, 2})}, mm(false, false)),
                     ErrorCode::DTypeMismatch, "numeric");

  auto lin = [](const std::vector<Tensor> &in) {
    return one(ops::linear(in[0], in[1], in.size() > 2 ? std::optional<Tensor>(in[2]) : std::nullopt));
  };
  TensorType x(DType::f32, {5, 16}), w(DType::f32, {32, 16});
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {16, 32})}, lin), ErrorCode::ShapeMismatch,
                     "input features 16 of f32[5,16] must equal the weight's in-features (dim 1) 32");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {2, 32, 16})}, lin), ErrorCode::ShapeMismatch,
                     "weight must have rank 2");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {}), w}, lin), ErrorCode::ShapeMismatch, "rank >= 1");
  MAXC_REQUIRE_ERROR(infer({x, w, TensorType(DType::f32, {16})}, lin), ErrorCode::ShapeMismatch,
                     "bias must be 1-D of the weight's out-features [32]");
  MAXC_REQUIRE_ERROR(infer({x, w, TensorType(DType::f16, {32})}, lin), ErrorCode::DTypeMismatch, "same dtype");
  MAXC_REQUIRE_ERROR(infer({x, w, TensorType(DType::f32, {32}), TensorType(DType::f32, {32})},
                           [](auto &in) { return one(record_op("linear", in)); }),
                     ErrorCode::OperandCount, "got 4");
  MAXC_REQUIRE_ERROR(infer({a23, TensorType(DType::f32, {3, 2})},
                           [](auto &in) {
                             return one(record_op("matmul", in, {{"transpose_c", true}}));
                           }),
                     ErrorCode::UnknownAttribute, "transpose_c");
}

TEST_CASE("matmul and linear by hand", "[ops][linalg]") {
  for (DType dtype : {DType::f32, DType::i32, DType::f64, DType::i64}) {
    INFO(dtype_name(dtype));
    HostTensor a = HostTensor::from_f64(dtype, {2, 3}, {1, 2, 3, 4, 5, 6});
    HostTensor b = HostTensor::from_f64(dtype, {3, 2}, {7, 8, 9, 10, 11, 12});
    auto outs = run_traced({a, b}, [](auto &in) {
      return std::vector<Tensor>{ops::matmul(in[0], in[1]), ops::matmul(in[1], in[0], true, true),
                                 ops::linear(in[0], in[0])};
    });
    CHECK(outs[0].shape() == std::vector<int64_t>{2, 2});
    CHECK(outs[0].to_f64() == std::vector<double>{58, 64, 139, 154});
    // (B^T)^T... matmul(b, a, T, T) = b^T a^T = (a b)^T
    CHECK(outs[1].shape() == std::vector<int64_t>{2, 2});
    CHECK(outs[1].to_f64() == std::vector<double>{58, 139, 64, 154});
    // a @ a^T = [[14, 32], [32, 77]]
    CHECK(outs[2].to_f64() == std::vector<double>{14, 32, 32, 77});
  }
  HostTensor x = HostTensor::from_f64(DType::f32, {1, 2}, {1, 2});
  HostTensor w = HostTensor::from_f64(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1});
  HostTensor bias = HostTensor::from_f64(DType::f32, {3}, {0.5, 0.5, -0.5});
  HostTensor y = run1({x, w, bias}, [](auto &in) { return ops::linear(in[0], in[1], in[2]); });
  CHECK(y.shape() == std::vector<int64_t>{1, 3});
  CHECK(y.to_f64() == std::vector<double>{1.5, 2.5, 2.5});
}

TEST_CASE("matmul matches explicit loops: broadcast batches, transposes, size-1 dims", "[ops][linalg]") {
  struct Case {
    std::vector<int64_t> a, b;
    bool ta, tb;
  };
  std::vector<Case> cases = {
      {{2, 3, 4}, {2, 4, 5}, false, false},    {{3, 1, 2, 4}, {5, 4, 3}, false, false},
      {{4, 2}, {2, 4, 3}, true, false},        {{2, 3, 4}, {5, 4}, false, true},
      {{1, 4, 3}, {2, 5, 4}, true, true},      {{1, 1}, {1, 1}, false, false},
      {{6, 1}, {1, 7}, false, false},          {{2, 1, 1, 5}, {1, 3, 5, 1}, false, false},
      {{1, 2, 3}, {4, 1, 3, 2}, false, false},
  };
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i8}) {
    for (const Case &c : cases) {
      INFO(dtype_name(dtype) << " a rank " << c.a.size() << " ta " << c.ta << " tb " << c.tb << " b rank "
                             << c.b.size());
      HostTensor a = random_tensor(dtype, c.a, -5, 5), b = random_tensor(dtype, c.b, -5, 5);
      HostTensor y = run1({a, b}, [&](auto &in) { return ops::matmul(in[0], in[1], c.ta, c.tb); });
      double tol = dtype == DType::f16 ? 2e-3 : 1e-6;
      MAXC_REQUIRE_CLOSE(y, naive_matmul(a, b, c.ta, c.tb), tol, tol);
    }
  }
}

TEST_CASE("matmul on empty tensors and with wrapping integers", "[ops][linalg]") {
  HostTensor a(DType::f32, {0, 2, 3}), b = random_tensor(DType::f32, {3, 4});
  CHECK(run1({a, b}, [](auto &in) { return ops::matmul(in[0], in[1]); }).shape() == std::vector<int64_t>{0, 2, 4});
  // K = 0: every output is an empty sum.
  HostTensor k0a(DType::f32, {2, 0}), k0b(DType::f32, {0, 3});
  HostTensor z = run1({k0a, k0b}, [](auto &in) { return ops::matmul(in[0], in[1]); });
  CHECK(z.to_f64() == std::vector<double>(6, 0.0));
  HostTensor m0(DType::f32, {0, 3});
  CHECK(run1({m0, b}, [](auto &in) { return ops::matmul(in[0], in[1]); }).shape() == std::vector<int64_t>{0, 4});
  HostTensor lx(DType::f32, {0, 4}), lw = random_tensor(DType::f32, {2, 4}), lb = random_tensor(DType::f32, {2});
  CHECK(run1({lx, lw, lb}, [](auto &in) { return ops::linear(in[0], in[1], in[2]); }).shape() ==
        std::vector<int64_t>{0, 2});
  // in-features 0: the output is the bias.
  HostTensor ex(DType::f32, {3, 0}), ew(DType::f32, {2, 0});
  HostTensor eb = HostTensor::from_f64(DType::f32, {2}, {1.5, -2});
  CHECK(run1({ex, ew, eb}, [](auto &in) { return ops::linear(in[0], in[1], in[2]); }).to_f64() ==
        std::vector<double>{1.5, -2, 1.5, -2, 1.5, -2});

  HostTensor i8a = HostTensor::from_i64(DType::i8, {1, 2}, {100, 100});
  HostTensor i8b = HostTensor::from_i64(DType::i8, {2, 1}, {2, 1});
  CHECK(run1({i8a, i8b}, [](auto &in) { return ops::matmul(in[0], in[1]); }).get_i64(0) == 300 - 256);
  const int64_t big = (int64_t{1} << 55) + 3; // beyond double's exact range
  HostTensor ia = HostTensor::from_i64(DType::i64, {1, 2}, {big, 1});
  HostTensor ib = HostTensor::from_i64(DType::i64, {2, 1}, {1, 1});
  CHECK(run1({ia, ib}, [](auto &in) { return ops::matmul(in[0], in[1]); }).get_i64(0) == big + 1);
  HostTensor iw = HostTensor::from_i64(DType::i64, {1, 2}, {1, 1});
  HostTensor ibias = HostTensor::from_i64(DType::i64, {1}, {INT64_MAX});
  CHECK(run1({ia, iw, ibias}, [](auto &in) { return ops::linear(in[0], in[1], in[2]); }).get_i64(0) ==
        static_cast<int64_t>(static_cast<uint64_t>(big + 1) + static_cast<uint64_t>(INT64_MAX)));
}

TEST_CASE("linear matches explicit loops on random inputs", "[ops][linalg]") {
  for (DType dtype : {DType::f32, DType::f64, DType::i32}) {
    INFO(dtype_name(dtype));
    HostTensor x = random_tensor(dtype, {2, 3, 8}, -4, 4), w = random_tensor(dtype, {5, 8}, -4, 4);
    HostTensor b = random_tensor(dtype, {5}, -4, 4);
    auto outs = run_traced({x, w, b}, [](auto &in) {
      return std::vector<Tensor>{ops::linear(in[0], in[1], in[2]), ops::linear(in[0], in[1])};
    });
    MAXC_REQUIRE_CLOSE(outs[0], naive_linear(x, w, &b), 1e-6, 1e-6);
    MAXC_REQUIRE_CLOSE(outs[1], naive_linear(x, w, nullptr), 1e-6, 1e-6);
  }
  HostTensor v = random_tensor(DType::f32, {8}), w = random_tensor(DType::f32, {1, 8});
  MAXC_REQUIRE_CLOSE(run1({v, w}, [](auto &in) { return ops::linear(in[0], in[1]); }), naive_linear(v, w, nullptr),
                     1e-6, 1e-6);
}

TEST_CASE("matmul runs with symbolic batch dims bound at run time", "[ops][linalg]") {
  Graph graph("sym", {TensorType(DType::f32, {Dim("batch"), 3, 4}), TensorType(DType::f32, {4, 2})});
  {
    GraphRealizationContext ctx(graph);
    graph.output(
        {ops::matmul(Tensor::from_graph_value(graph.inputs()[0]), Tensor::from_graph_value(graph.inputs()[1]))});
  }
  HostTensor a = random_tensor(DType::f32, {5, 3, 4}), b = random_tensor(DType::f32, {4, 2});
  MAXC_REQUIRE_CLOSE(Interpreter::run(graph, {a, b}).at(0), naive_matmul(a, b, false, false), 1e-6, 1e-6);
}

TEST_CASE("a GPT-sized matmul runs on the interpreter", "[ops][linalg]") {
  HostTensor a = random_tensor(DType::f32, {128, 256}), b = random_tensor(DType::f32, {256, 768});
  HostTensor y = run1({a, b}, [](auto &in) { return ops::matmul(in[0], in[1]); }); // runs twice: graph + eager
  // Spot-check a few entries against a dot product.
  for (int64_t i : {0, 77, 127})
    for (int64_t j : {0, 300, 767}) {
      double acc = 0;
      for (int64_t k = 0; k < 256; ++k)
        acc += a.get_f64(i * 256 + k) * b.get_f64(k * 768 + j);
      CHECK(y.get_f64(i * 768 + j) == static_cast<float>(acc));
    }
}
