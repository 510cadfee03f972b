// Shape ops: inference (static and symbolic dims), verifier errors, and
// reference results checked byte-for-byte against expected tensors built here
// with explicit index arithmetic.
#include "TestUtil.h"

#include <cstring>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

using Sizes = std::vector<int64_t>;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

const std::vector<DType> kTestDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                        DType::i8,  DType::i32, DType::i64, DType::boolean};

// Row-major multi-index of linear index i (test-local, independent of lib).
Sizes index_of(int64_t i, const Sizes &shape) {
  Sizes idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t linear_of(const Sizes &idx, const Sizes &shape) {
  int64_t lin = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    lin = lin * shape[d] + idx[d];
  return lin;
}

int64_t count(const Sizes &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// Builds the expected tensor: element at out multi-index `o` copies the bytes
// of src[source(o)], or of `fill` when source returns -1.
HostTensor expect(const HostTensor &src, const Sizes &out_shape, const std::function<int64_t(const Sizes &)> &source,
                  const HostTensor *fill = nullptr) {
  HostTensor out(src.dtype(), out_shape);
  size_t es = dtype_size(src.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t s = source(index_of(i, out_shape));
    const std::byte *from = s < 0 ? fill->data() : src.data() + s * es;
    std::memcpy(out.data() + i * es, from, es);
  }
  return out;
}

std::vector<Tensor> vec(Tensor t) { return std::vector<Tensor>{std::move(t)}; }

// Traces `build` over inputs of the given (possibly symbolic) types and runs
// the interpreter on concrete inputs.
std::vector<HostTensor> run_symbolic(const std::vector<TensorType> &types, const std::vector<HostTensor> &inputs,
                                     const BuildFn &build) {
  Graph graph("symbolic", types);
  {
    GraphRealizationContext ctx(graph);
    std::vector<Tensor> args;
    for (const Value &v : graph.inputs())
      args.push_back(Tensor::from_graph_value(v));
    std::vector<Value> values;
    for (const Tensor &t : build(args))
      values.push_back(t.value());
    graph.output(values);
  }
  graph.verify();
  return Interpreter::run(graph, inputs);
}

// Random data for every dtype; integers span a wide range.
HostTensor random_of(DType dtype, Sizes shape) { return random_tensor(dtype, std::move(shape), -100, 100); }

std::string type_str(const std::vector<TensorType> &t) { return t.at(0).to_string(); }

} // namespace

// ---------------------------------------------------------------- reshape

TEST_CASE("reshape infers static, symbolic and -1 dims", "[ops][shape]") {
  auto reshape = [](Shape s) { return [s](const std::vector<Tensor> &in) { return vec(ops::reshape(in[0], s)); }; };
  TensorType x(DType::f32, {2, 3, 4});
  CHECK(type_str(infer({x}, reshape({6, -1}))) == "f32[6,4]");
  CHECK(type_str(infer({x}, reshape({-1}))) == "f32[24]");
  CHECK(type_str(infer({x}, reshape({4, 1, 6}))) == "f32[4,1,6]");
  CHECK(type_str(infer({TensorType(DType::f32, {0, 4})}, reshape({-1, 2}))) == "f32[0,2]");

  TensorType bs(DType::f16, {Dim("batch"), Dim("seq"), 256});
  CHECK(type_str(infer({bs}, reshape({Dim("batch"), Dim("seq"), 4, 64}))) == "f16[batch,seq,4,64]");
  CHECK(type_str(infer({bs}, reshape({Dim("batch") * Dim("seq"), 256}))) == "f16[batch*seq,256]");
  CHECK(type_str(infer({bs}, reshape({-1, 256}))) == "f16[batch*seq,256]");
  CHECK(type_str(infer({bs}, reshape({Dim("batch"), -1}))) == "f16[batch,256*seq]");
  CHECK(type_str(infer({bs}, reshape({Dim("batch"), Dim("seq"), -1, 64}))) == "f16[batch,seq,4,64]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch") * 4, 8})}, reshape({Dim("batch"), -1}))) ==
        "f32[batch,32]");
}

TEST_CASE("reshape verifier errors", "[ops][shape]") {
  auto reshape = [](Shape s) { return [s](const std::vector<Tensor> &in) { return vec(ops::reshape(in[0], s)); }; };
  TensorType x(DType::f32, {2, 3});
  MAXC_REQUIRE_ERROR(infer({x}, reshape({4, 2})), ErrorCode::ShapeMismatch, "cannot reshape [2,3] into [4,2]");
  MAXC_REQUIRE_ERROR(infer({x}, reshape({-1, 4})), ErrorCode::ShapeMismatch, "[2,3] into [-1,4]");
  MAXC_REQUIRE_ERROR(infer({x}, reshape({-1, -1})), ErrorCode::InvalidAttribute, "only one dim");
  MAXC_REQUIRE_ERROR(infer({x}, reshape({-2, -3})), ErrorCode::InvalidAttribute, "negative");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {0, 4})}, reshape({0, -1})), ErrorCode::ShapeMismatch,
                     "cannot be inferred");
  TensorType bs(DType::f32, {Dim("batch"), 3});
  MAXC_REQUIRE_ERROR(infer({bs}, reshape({-1, 2})), ErrorCode::ShapeMismatch, "[batch,3] into [-1,2]");
  MAXC_REQUIRE_ERROR(infer({bs}, reshape({Dim("seq"), 3})), ErrorCode::ShapeMismatch, "[batch,3] into [seq,3]");
  MAXC_REQUIRE_ERROR(infer({bs}, reshape({-1, Dim("seq")})), ErrorCode::ShapeMismatch, "cannot be inferred");
}

TEST_CASE("reshape keeps the bytes of every dtype", "[ops][shape]") {
  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor x = random_of(dtype, {2, 3, 4});
    HostTensor y = run1({x}, [](auto &in) { return ops::reshape(in[0], {4, -1, 2}); });
    REQUIRE(y.shape() == Sizes{4, 3, 2});
    CHECK(y.identical(x.reshaped({4, 3, 2})));
  }
  // Symbolic result types evaluate under the bound dims.
  HostTensor x = random_of(DType::f32, {2, 3, 8});
  auto out = run_symbolic({TensorType(DType::f32, {Dim("batch"), Dim("seq"), 8})}, {x}, [](auto &in) {
    return std::vector<Tensor>{ops::reshape(in[0], {-1, 8}), ops::reshape(in[0], {Dim("batch"), Dim("seq"), 2, 4})};
  });
  CHECK(out[0].identical(x.reshaped({6, 8})));
  CHECK(out[1].identical(x.reshaped({2, 3, 2, 4})));
}

// ---------------------------------------------------------------- transpose

TEST_CASE("transpose inference and errors", "[ops][shape]") {
  auto tr = [](Sizes p) { return [p](const std::vector<Tensor> &in) { return vec(ops::transpose(in[0], p)); }; };
  TensorType x(DType::f32, {Dim("a"), 3, Dim("b")});
  CHECK(type_str(infer({x}, tr({2, 0, 1}))) == "f32[b,a,3]");
  CHECK(type_str(infer({x}, tr({}))) == "f32[b,3,a]");
  CHECK(type_str(infer({x}, tr({-1, 0, -2}))) == "f32[b,a,3]");
  CHECK(type_str(infer({TensorType(DType::f32, {})}, tr({}))) == "f32[]");
  MAXC_REQUIRE_ERROR(infer({x}, tr({0, 0, 1})), ErrorCode::InvalidAttribute, "not a permutation");
  MAXC_REQUIRE_ERROR(infer({x}, tr({0, 1})), ErrorCode::InvalidAttribute, "one entry per dim");
  MAXC_REQUIRE_ERROR(infer({x}, tr({0, 1, 3})), ErrorCode::InvalidAttribute, "axis 3 is out of range");

  // permute is an alias recording "transpose".
  Graph g("alias", {x});
  {
    GraphRealizationContext ctx(g);
    Tensor t = ops::permute(Tensor::from_graph_value(g.inputs()[0]), {1, 2, 0});
    CHECK(t.type().to_string() == "f32[3,b,a]");
  }
  REQUIRE(g.nodes().size() == 1);
  CHECK(g.nodes()[0].op == "transpose");
}

TEST_CASE("transpose results on every dtype", "[ops][shape]") {
  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    Sizes in_shape{2, 3, 4, 5};
    Sizes perm{2, 0, 3, 1};
    HostTensor x = random_of(dtype, in_shape);
    HostTensor y = run1({x}, [&](auto &in) { return ops::permute(in[0], perm); });
    Sizes out_shape{4, 2, 5, 3};
    HostTensor e = expect(x, out_shape, [&](const Sizes &o) {
      Sizes i(4);
      for (size_t d = 0; d < 4; ++d)
        i[perm[d]] = o[d];
      return linear_of(i, in_shape);
    });
    CHECK(y.identical(e));
    HostTensor r = run1({x}, [](auto &in) { return ops::transpose(in[0]); });
    CHECK(r.identical(expect(x, {5, 4, 3, 2}, [&](const Sizes &o) {
      return linear_of({o[3], o[2], o[1], o[0]}, in_shape);
    })));
  }
  // Hand-worked 2-D case and an empty tensor.
  HostTensor m = HostTensor::from_i64(DType::i32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(run1({m}, [](auto &in) { return ops::transpose(in[0]); }).to_i64() == Sizes{1, 4, 2, 5, 3, 6});
  HostTensor z(DType::f32, {0, 3});
  CHECK(run1({z}, [](auto &in) { return ops::transpose(in[0]); }).shape() == Sizes{3, 0});
}

// ---------------------------------------------------------------- broadcast_to

TEST_CASE("broadcast_to inference, errors and results", "[ops][shape]") {
  auto bt = [](Shape s) { return [s](const std::vector<Tensor> &in) { return vec(ops::broadcast_to(in[0], s)); }; };
  CHECK(type_str(infer({TensorType(DType::f32, {3, 1})}, bt({2, 3, 4}))) == "f32[2,3,4]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch"), 1})}, bt({Dim("batch"), 5}))) == "f32[batch,5]");
  CHECK(type_str(infer({TensorType(DType::f32, {1})}, bt({Dim("batch"), Dim("seq")}))) == "f32[batch,seq]");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {3})}, bt({4})), ErrorCode::ShapeMismatch,
                     "cannot broadcast [3] to [4]");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 3})}, bt({3})), ErrorCode::ShapeMismatch, "lower-rank");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {Dim("batch")})}, bt({Dim("seq")})), ErrorCode::ShapeMismatch,
                     "input dim 0 is batch");

  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor x = random_of(dtype, {3, 1});
    HostTensor y = run1({x}, [](auto &in) { return ops::broadcast_to(in[0], {2, 3, 4}); });
    CHECK(y.identical(expect(x, {2, 3, 4}, [](const Sizes &o) { return o[1]; })));
  }
  HostTensor s = HostTensor::from_f64(DType::f32, {}, {2.5});
  CHECK(run1({s}, [](auto &in) { return ops::broadcast_to(in[0], {2, 2}); }).to_f64() ==
        std::vector<double>{2.5, 2.5, 2.5, 2.5});
  HostTensor z(DType::f32, {0, 1});
  CHECK(run1({z}, [](auto &in) { return ops::broadcast_to(in[0], {2, 0, 3}); }).shape() == Sizes{2, 0, 3});
}

// ---------------------------------------------------------------- squeeze / unsqueeze

TEST_CASE("squeeze and unsqueeze", "[ops][shape]") {
  auto sq = [](Sizes a) { return [a](const std::vector<Tensor> &in) { return vec(ops::squeeze(in[0], a)); }; };
  auto usq = [](Sizes a) { return [a](const std::vector<Tensor> &in) { return vec(ops::unsqueeze(in[0], a)); }; };
  TensorType x(DType::f32, {1, 3, 1, Dim("batch")});
  CHECK(type_str(infer({x}, sq({}))) == "f32[3,batch]");
  CHECK(type_str(infer({x}, sq({-2}))) == "f32[1,3,batch]");
  CHECK(type_str(infer({x}, sq({0, 2}))) == "f32[3,batch]");
  CHECK(type_str(infer({TensorType(DType::f32, {1, 1})}, sq({}))) == "f32[]");
  MAXC_REQUIRE_ERROR(infer({x}, sq({1})), ErrorCode::ShapeMismatch, "its size is 3, not 1");
  MAXC_REQUIRE_ERROR(infer({x}, sq({3})), ErrorCode::ShapeMismatch, "symbolic");
  MAXC_REQUIRE_ERROR(infer({x}, sq({4})), ErrorCode::InvalidAttribute, "out of range");
  MAXC_REQUIRE_ERROR(infer({x}, sq({0, -4})), ErrorCode::InvalidAttribute, "duplicate");

  TensorType y(DType::i64, {3, Dim("n")});
  CHECK(type_str(infer({y}, usq({0, -1}))) == "i64[1,3,n,1]");
  CHECK(type_str(infer({y}, usq({1}))) == "i64[3,1,n]");
  CHECK(type_str(infer({y}, usq({-2}))) == "i64[3,1,n]");
  CHECK(type_str(infer({y}, usq({0, 1, 2}))) == "i64[1,1,1,3,n]");
  CHECK(type_str(infer({TensorType(DType::f32, {})}, usq({0}))) == "f32[1]");
  MAXC_REQUIRE_ERROR(infer({y}, usq({3})), ErrorCode::InvalidAttribute, "out of range");
  MAXC_REQUIRE_ERROR(infer({y}, usq({1, 1})), ErrorCode::InvalidAttribute, "duplicate");

  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor a = random_of(dtype, {1, 3, 1, 2});
    auto outs = run_traced({a}, [](auto &in) {
      return std::vector<Tensor>{ops::squeeze(in[0]), ops::squeeze(in[0], {-4}), ops::unsqueeze(in[0], {-1, 1})};
    });
    CHECK(outs[0].identical(a.reshaped({3, 2})));
    CHECK(outs[1].identical(a.reshaped({3, 1, 2})));
    CHECK(outs[2].identical(a.reshaped({1, 1, 3, 1, 2, 1})));
  }
  HostTensor z(DType::f32, {0, 1});
  CHECK(run1({z}, [](auto &in) { return ops::squeeze(in[0]); }).shape() == Sizes{0});
}

// ---------------------------------------------------------------- concat

TEST_CASE("concat inference and errors", "[ops][shape]") {
  auto cat = [](int64_t axis) { return [axis](const std::vector<Tensor> &in) { return vec(ops::concat(in, axis)); }; };
  TensorType a(DType::f32, {2, 1, 4}), b(DType::f32, {2, 3, 4}), c(DType::f32, {2, 0, 4});
  CHECK(type_str(infer({a, b, c}, cat(1))) == "f32[2,4,4]");
  CHECK(type_str(infer({a, b, c}, cat(-2))) == "f32[2,4,4]");
  CHECK(type_str(infer({a}, cat(0))) == "f32[2,1,4]");
  TensorType sb(DType::f32, {Dim("batch"), 2}), ss(DType::f32, {Dim("seq"), 2});
  CHECK(type_str(infer({sb, ss, sb}, cat(0))) == "f32[2*batch+seq,2]");
  CHECK(type_str(infer({sb, sb}, cat(1))) == "f32[batch,4]");

  MAXC_REQUIRE_ERROR(infer({a, TensorType(DType::f16, {2, 1, 4})}, cat(1)), ErrorCode::DTypeMismatch, "same dtype");
  MAXC_REQUIRE_ERROR(infer({a, b}, cat(0)), ErrorCode::ShapeMismatch, "in dim 1");
  MAXC_REQUIRE_ERROR(infer({sb, ss}, cat(1)), ErrorCode::ShapeMismatch, "in dim 0");
  MAXC_REQUIRE_ERROR(infer({a, TensorType(DType::f32, {2, 1})}, cat(1)), ErrorCode::ShapeMismatch, "rank");
  MAXC_REQUIRE_ERROR(infer({a, b}, cat(3)), ErrorCode::InvalidAttribute, "axis 3");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {})}, cat(0)), ErrorCode::ShapeMismatch, "rank >= 1");
  MAXC_REQUIRE_ERROR(infer({}, cat(0)), ErrorCode::OperandCount, "at least 1");
}

TEST_CASE("concat of three tensors on every dtype", "[ops][shape]") {
  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor a = random_of(dtype, {2, 1, 4}), b = random_of(dtype, {2, 3, 4}), c = random_of(dtype, {2, 2, 4});
    HostTensor y = run1({a, b, c}, [](auto &in) { return ops::concat(in, 1); });
    REQUIRE(y.shape() == Sizes{2, 6, 4});
    // Expected built element by element through the value accessors.
    HostTensor e(dtype, {2, 6, 4});
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 6; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          const HostTensor &src = j < 1 ? a : j < 4 ? b : c;
          int64_t jj = j < 1 ? j : j < 4 ? j - 1 : j - 4, rows = j < 1 ? 1 : j < 4 ? 3 : 2;
          std::memcpy(e.data() + ((i * 6 + j) * 4 + k) * dtype_size(dtype),
                      src.data() + ((i * rows + jj) * 4 + k) * dtype_size(dtype), dtype_size(dtype));
        }
    CHECK(y.identical(e));
  }
  HostTensor p = HostTensor::from_i64(DType::i64, {2, 1}, {1, 2});
  HostTensor q = HostTensor::from_i64(DType::i64, {2, 2}, {3, 4, 5, 6});
  HostTensor z(DType::i64, {2, 0});
  CHECK(run1({p, z, q}, [](auto &in) { return ops::concat(in, -1); }).to_i64() == Sizes{1, 3, 4, 2, 5, 6});
  // Symbolic concatenated dims evaluate to the sum.
  HostTensor u = random_of(DType::f32, {2, 3}), v = random_of(DType::f32, {4, 3});
  auto out = run_symbolic({TensorType(DType::f32, {Dim("m"), 3}), TensorType(DType::f32, {Dim("n"), 3})}, {u, v},
                          [](auto &in) { return vec(ops::concat(in, 0)); });
  REQUIRE(out[0].shape() == Sizes{6, 3});
  CHECK(std::memcmp(out[0].data(), u.data(), u.nbytes()) == 0);
  CHECK(std::memcmp(out[0].data() + u.nbytes(), v.data(), v.nbytes()) == 0);
}

// ---------------------------------------------------------------- split

TEST_CASE("split into three pieces", "[ops][shape]") {
  auto sp = [](Sizes s, int64_t axis) {
    return [s, axis](const std::vector<Tensor> &in) { return ops::split(in[0], s, axis); };
  };
  TensorType x(DType::f32, {Dim("batch"), 6});
  auto types = infer({x}, sp({1, 2, 3}, 1));
  REQUIRE(types.size() == 3);
  CHECK(types[0].to_string() == "f32[batch,1]");
  CHECK(types[1].to_string() == "f32[batch,2]");
  CHECK(types[2].to_string() == "f32[batch,3]");
  CHECK(infer({x}, sp({6, 0}, -1))[1].to_string() == "f32[batch,0]");
  MAXC_REQUIRE_ERROR(infer({x}, sp({1, 2}, 1)), ErrorCode::ShapeMismatch, "sum to 3");
  MAXC_REQUIRE_ERROR(infer({x}, sp({1, 1}, 0)), ErrorCode::ShapeMismatch, "symbolic");
  MAXC_REQUIRE_ERROR(infer({x}, sp({7, -1}, 1)), ErrorCode::InvalidAttribute, "negative");
  MAXC_REQUIRE_ERROR(infer({x}, sp({}, 1)), ErrorCode::InvalidAttribute, "empty");
  MAXC_REQUIRE_ERROR(infer({x}, sp({6}, 2)), ErrorCode::InvalidAttribute, "axis 2");

  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor a = random_of(dtype, {3, 6, 2});
    auto outs = run_traced({a}, [](auto &in) { return ops::split(in[0], {1, 2, 3}, -2); });
    REQUIRE(outs.size() == 3);
    int64_t begin = 0;
    for (int64_t p = 0; p < 3; ++p) {
      int64_t len = p + 1;
      CHECK(outs[p].identical(
          expect(a, {3, len, 2}, [&](const Sizes &o) { return linear_of({o[0], o[1] + begin, o[2]}, {3, 6, 2}); })));
      begin += len;
    }
  }
  HostTensor m = HostTensor::from_i64(DType::i32, {5}, {1, 2, 3, 4, 5});
  auto pieces = run_traced({m}, [](auto &in) { return ops::split(in[0], {2, 0, 3}, 0); });
  CHECK(pieces[0].to_i64() == Sizes{1, 2});
  CHECK(pieces[1].shape() == Sizes{0});
  CHECK(pieces[2].to_i64() == Sizes{3, 4, 5});
}

// ---------------------------------------------------------------- slice

namespace {

// The indices Python's range(*slice(start, end, step).indices(n)) visits,
// computed by walking rather than by a length formula.
Sizes python_indices(int64_t start, int64_t end, int64_t step, int64_t n) {
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](int64_t v) {
    if (v < 0)
      return v < -n ? (step < 0 ? -1 : 0) : v + n;
    return v >= n ? (step < 0 ? n - 1 : n) : v;
  };
  int64_t s = adjust(start), e = adjust(end);
  Sizes out;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step)
    out.push_back(i);
  return out;
}

} // namespace

TEST_CASE("slice inference and errors", "[ops][shape]") {
  auto sl = [](Sizes s, Sizes e, Sizes a = {}, Sizes st = {}) {
    return [=](const std::vector<Tensor> &in) { return vec(ops::slice(in[0], s, e, a, st)); };
  };
  TensorType x(DType::f32, {10, 6});
  CHECK(type_str(infer({x}, sl({2}, {8}, {0}, {2}))) == "f32[3,6]");
  CHECK(type_str(infer({x}, sl({-1}, {std::numeric_limits<int64_t>::min()}, {0}, {-1}))) == "f32[10,6]");
  CHECK(type_str(infer({x}, sl({1, 0}, {kEnd, -1}))) == "f32[9,5]");
  CHECK(type_str(infer({x}, sl({0}, {-2}, {-1}))) == "f32[10,4]");
  CHECK(type_str(infer({x}, sl({7}, {3}, {0}))) == "f32[0,6]");
  TensorType s(DType::f32, {Dim("batch"), 10});
  CHECK(type_str(infer({s}, sl({0, 2}, {kEnd, 5}))) == "f32[batch,3]");
  CHECK(type_str(infer({s}, sl({-3}, {kEnd}, {1}))) == "f32[batch,3]");
  MAXC_REQUIRE_ERROR(infer({s}, sl({1}, {kEnd})), ErrorCode::ShapeMismatch, "symbolic dim 'batch'");
  MAXC_REQUIRE_ERROR(infer({s}, sl({0}, {4})), ErrorCode::ShapeMismatch, "only the full range");
  MAXC_REQUIRE_ERROR(infer({s}, sl({0}, {kEnd}, {0}, {2})), ErrorCode::ShapeMismatch, "step 2");
  MAXC_REQUIRE_ERROR(infer({x}, sl({0}, {5}, {0}, {0})), ErrorCode::InvalidAttribute, "non-zero");
  MAXC_REQUIRE_ERROR(infer({x}, sl({0, 1}, {5})), ErrorCode::InvalidAttribute, "same length");
  MAXC_REQUIRE_ERROR(infer({x}, sl({0}, {5}, {0, 1})), ErrorCode::InvalidAttribute, "one entry per start");
  MAXC_REQUIRE_ERROR(infer({x}, sl({0, 0}, {5, 5}, {1, -1})), ErrorCode::InvalidAttribute, "sliced twice");
  MAXC_REQUIRE_ERROR(infer({x}, sl({0}, {5}, {2})), ErrorCode::InvalidAttribute, "axis 2");
}

TEST_CASE("slice follows Python semantics", "[ops][shape]") {
  HostTensor r = HostTensor::from_i64(DType::i64, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto s1 = [&](int64_t s, int64_t e, int64_t st) {
    return run1({r}, [=](auto &in) { return ops::slice(in[0], {s}, {e}, {}, {st}); }).to_i64();
  };
  // Hand-worked cases (Python: list(range(10))[s:e:st]).
  CHECK(s1(1, 7, 2) == Sizes{1, 3, 5});
  CHECK(s1(kEnd, std::numeric_limits<int64_t>::min(), -1) == Sizes{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(s1(-3, kEnd, 1) == Sizes{7, 8, 9});
  CHECK(s1(8, 2, -3) == Sizes{8, 5});
  CHECK(s1(100, 200, 1).empty());
  CHECK(s1(-100, 3, 1) == Sizes{0, 1, 2});
  CHECK(s1(-1, -4, -1) == Sizes{9, 8, 7});
  CHECK(s1(3, -100, -2) == Sizes{3, 1});
  CHECK(s1(0, kEnd, kEnd) == Sizes{0});
  CHECK(s1(5, 0, 1).empty());

  // Random multi-axis slices against walked indices, on every dtype.
  const Sizes shape{5, 6, 7};
  const std::vector<std::vector<Sizes>> cases = {
      // starts, ends, axes, steps
      {{1, -1}, {4, 0}, {0, 2}, {1, -2}},
      {{-1, 0, 6}, {-100, kEnd, 1}, {0, 1, 2}, {-2, 3, -1}},
      {{2}, {2}, {1}, {1}},
      {{10, -10}, {-10, 10}, {-1, -3}, {-1, 1}},
  };
  for (DType dtype : kTestDTypes) {
    for (const auto &c : cases) {
      INFO(dtype_name(dtype));
      HostTensor x = random_of(dtype, shape);
      HostTensor y = run1({x}, [&](auto &in) { return ops::slice(in[0], c[0], c[1], c[2], c[3]); });
      std::vector<Sizes> picks;
      for (int64_t d = 0; d < 3; ++d) {
        Sizes all;
        for (int64_t i = 0; i < shape[d]; ++i)
          all.push_back(i);
        picks.push_back(all);
      }
      for (size_t k = 0; k < c[0].size(); ++k) {
        int64_t axis = c[2][k] < 0 ? c[2][k] + 3 : c[2][k];
        picks[axis] = python_indices(c[0][k], c[1][k], c[3][k], shape[axis]);
      }
      Sizes out_shape{static_cast<int64_t>(picks[0].size()), static_cast<int64_t>(picks[1].size()),
                      static_cast<int64_t>(picks[2].size())};
      CHECK(y.identical(expect(x, out_shape, [&](const Sizes &o) {
        return linear_of({picks[0][o[0]], picks[1][o[1]], picks[2][o[2]]}, shape);
      })));
    }
  }
  // Full range on a symbolic dim plus a static slice, run with bound dims.
  HostTensor x = random_of(DType::f32, {3, 4});
  auto out = run_symbolic({TensorType(DType::f32, {Dim("batch"), 4})}, {x},
                          [](auto &in) { return vec(ops::slice(in[0], {0, -1}, {kEnd, 0}, {0, 1}, {1, -2})); });
  CHECK(out[0].identical(expect(x, {3, 2}, [](const Sizes &o) { return o[0] * 4 + 3 - 2 * o[1]; })));
}

// ---------------------------------------------------------------- gather / embedding

TEST_CASE("gather inference and errors", "[ops][shape]") {
  auto ga = [](int64_t axis) {
    return [axis](const std::vector<Tensor> &in) { return vec(ops::gather(in[0], in[1], axis)); };
  };
  TensorType x(DType::f32, {3, 4, Dim("n")}), idx(DType::i32, {Dim("b"), 2});
  CHECK(type_str(infer({x, idx}, ga(1))) == "f32[3,b,2,n]");
  CHECK(type_str(infer({x, idx}, ga(0))) == "f32[b,2,4,n]");
  CHECK(type_str(infer({x, idx}, ga(-1))) == "f32[3,4,b,2]");
  CHECK(type_str(infer({x, TensorType(DType::i64, {})}, ga(1))) == "f32[3,n]");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::f32, {2})}, ga(0)), ErrorCode::DTypeMismatch, "indices");
  MAXC_REQUIRE_ERROR(infer({x, TensorType(DType::boolean, {2})}, ga(0)), ErrorCode::DTypeMismatch, "integer");
  MAXC_REQUIRE_ERROR(infer({x, idx}, ga(3)), ErrorCode::InvalidAttribute, "axis 3");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {}), idx}, ga(0)), ErrorCode::ShapeMismatch, "rank >= 1");
}

TEST_CASE("gather with a 2-D index tensor on axis 1", "[ops][shape]") {
  for (DType dtype : kTestDTypes) {
    for (DType itype : {DType::i8, DType::i32, DType::i64}) {
      INFO(dtype_name(dtype) << " indices " << dtype_name(itype));
      HostTensor x = random_of(dtype, {3, 4, 5});
      HostTensor idx = HostTensor::from_i64(itype, {2, 3}, {0, 3, -1, 2, -4, 1});
      HostTensor y = run1({x, idx}, [](auto &in) { return ops::gather(in[0], in[1], 1); });
      REQUIRE(y.shape() == Sizes{3, 2, 3, 5});
      CHECK(y.identical(expect(x, {3, 2, 3, 5}, [&](const Sizes &o) {
        int64_t k = idx.get_i64(o[1] * 3 + o[2]);
        k = k < 0 ? k + 4 : k;
        return (o[0] * 4 + k) * 5 + o[3];
      })));
    }
  }
  // Hand-worked: take rows 2, 0, 2 of a 3x2 matrix.
  HostTensor m = HostTensor::from_i64(DType::i64, {3, 2}, {10, 11, 20, 21, 30, 31});
  HostTensor rows = HostTensor::from_i64(DType::i64, {3}, {2, 0, -1});
  CHECK(run1({m, rows}, [](auto &in) { return ops::gather(in[0], in[1]); }).to_i64() ==
        Sizes{30, 31, 10, 11, 30, 31});
  // Empty index tensor and empty data.
  HostTensor none(DType::i64, {0});
  CHECK(run1({m, none}, [](auto &in) { return ops::gather(in[0], in[1], 1); }).shape() == Sizes{3, 0});
  HostTensor empty(DType::f32, {0, 4});
  HostTensor one = HostTensor::from_i64(DType::i32, {1}, {3});
  CHECK(run1({empty, one}, [](auto &in) { return ops::gather(in[0], in[1], 1); }).shape() == Sizes{0, 1});
}

TEST_CASE("gather and embedding: negatives wrap once, out-of-range indices clamp", "[ops][shape]") {
  // rows 0..3 of a [4, 3] matrix; the documented semantics (docs/ops.md) that
  // the compiled CPU and GPU code implement too.
  HostTensor x = HostTensor::from_i64(DType::i64, {4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  HostTensor idx = HostTensor::from_i64(DType::i64, {7}, {4, -5, 100, -1, -4, INT64_MIN, INT64_MAX});
  const Sizes rows = {3, 0, 3, 3, 0, 0, 3};
  Sizes expected;
  for (int64_t r : rows)
    for (int64_t c = 0; c < 3; ++c)
      expected.push_back(r * 10 + c);
  CHECK(run1({x, idx}, [](auto &in) { return ops::gather(in[0], in[1], 0); }).to_i64() == expected);
  CHECK(run1({x, idx}, [](auto &in) { return ops::embedding(in[0], in[1]); }).to_i64() == expected);
  HostTensor idx3 = HostTensor::from_i64(DType::i32, {2}, {3, -4});
  CHECK(run1({x, idx3}, [](auto &in) { return ops::gather(in[0], in[1], 1); }).to_i64() ==
        Sizes{2, 0, 12, 10, 22, 20, 32, 30});
  // An empty axis has nothing to select: zeros, the operand never read.
  HostTensor empty(DType::f32, {3, 0});
  HostTensor two = HostTensor::from_i64(DType::i32, {2}, {0, 5});
  HostTensor got = run1({empty, two}, [](auto &in) { return ops::gather(in[0], in[1], 1); });
  CHECK(got.shape() == Sizes{3, 2});
  CHECK(got.to_f64() == std::vector<double>(6, 0.0));
}

TEST_CASE("embedding looks up rows", "[ops][shape]") {
  auto emb = [](const std::vector<Tensor> &in) { return vec(ops::embedding(in[0], in[1])); };
  CHECK(type_str(infer({TensorType(DType::f16, {Dim("vocab"), 8}), TensorType(DType::i64, {Dim("batch"), Dim("seq")})},
                       emb)) == "f16[batch,seq,8]");
  CHECK(type_str(infer({TensorType(DType::f32, {5, 3}), TensorType(DType::i32, {})}, emb)) == "f32[3]");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {5, 3, 2}), TensorType(DType::i32, {2})}, emb),
                     ErrorCode::ShapeMismatch, "table must have rank 2");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {5, 3}), TensorType(DType::f32, {2})}, emb),
                     ErrorCode::DTypeMismatch, "ids must be an integer tensor");

  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor table = random_of(dtype, {5, 3});
    HostTensor ids = random_tensor(DType::i32, {2, 4}, 0, 4);
    HostTensor y = run1({table, ids}, [](auto &in) { return ops::embedding(in[0], in[1]); });
    CHECK(y.identical(expect(table, {2, 4, 3}, [&](const Sizes &o) {
      return ids.get_i64(o[0] * 4 + o[1]) * 3 + o[2];
    })));
  }
}

// ---------------------------------------------------------------- pad

TEST_CASE("pad inference and errors", "[ops][shape]") {
  auto pd = [](Sizes p, double v = 0) {
    return [=](const std::vector<Tensor> &in) { return vec(ops::pad(in[0], p, v)); };
  };
  CHECK(type_str(infer({TensorType(DType::f32, {2, 3})}, pd({1, 0, 2, 1}))) == "f32[3,6]");
  CHECK(type_str(infer({TensorType(DType::f32, {3, 4})}, pd({-1, 0, 1, -2}))) == "f32[2,3]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch"), 4})}, pd({2, 0, 0, 0}))) == "f32[batch+2,4]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch"), 4})}, pd({1, -1, 0, 0}))) == "f32[batch,4]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch")})}, pd({0, -1}))) == "f32[batch-1]");
  CHECK(type_str(infer({TensorType(DType::f32, {2})}, pd({-2, 0}))) == "f32[0]");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 3})}, pd({1, 1})), ErrorCode::InvalidAttribute,
                     "2 entries per dim");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 3})}, pd({0, 0, -2, -2})), ErrorCode::ShapeMismatch,
                     "below zero");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::i32, {2})}, pd({1, 1}, 0.5)), ErrorCode::InvalidAttribute,
                     "not representable");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::i8, {2})}, pd({1, 1}, 300)), ErrorCode::InvalidAttribute,
                     "not representable");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::boolean, {2})}, pd({1, 1}, 2)), ErrorCode::InvalidAttribute,
                     "not representable");
}

TEST_CASE("pad results, including negative pads", "[ops][shape]") {
  // Hand-worked.
  HostTensor m = HostTensor::from_i64(DType::i32, {2, 2}, {1, 2, 3, 4});
  CHECK(run1({m}, [](auto &in) { return ops::pad(in[0], {1, 0, 0, 1}, 9); }).to_i64() ==
        Sizes{9, 9, 9, 1, 2, 9, 3, 4, 9});
  CHECK(run1({m}, [](auto &in) { return ops::pad(in[0], {0, -1, -1, 2}, 7); }).to_i64() == Sizes{2, 7, 7});

  const std::vector<Sizes> pad_cases = {{1, 2, 0, 3}, {-1, 0, 1, -2}, {2, -3, -1, -1}, {0, 0, 0, 0}};
  for (DType dtype : kTestDTypes) {
    for (const Sizes &p : pad_cases) {
      INFO(dtype_name(dtype));
      HostTensor x = random_of(dtype, {3, 4});
      double value = is_bool(dtype) ? 1 : -7;
      HostTensor y = run1({x}, [&](auto &in) { return ops::pad(in[0], p, value); });
      Sizes out_shape{3 + p[0] + p[1], 4 + p[2] + p[3]};
      HostTensor fill = HostTensor::scalar(dtype, value);
      CHECK(y.identical(expect(x, out_shape, [&](const Sizes &o) -> int64_t {
        int64_t i = o[0] - p[0], j = o[1] - p[2];
        return i >= 0 && i < 3 && j >= 0 && j < 4 ? i * 4 + j : -1;
      }, &fill)));
    }
  }
  // Symbolic dims: shape arithmetic evaluated at run time.
  HostTensor x = random_of(DType::f32, {3, 2});
  auto out = run_symbolic({TensorType(DType::f32, {Dim("n"), 2})}, {x},
                          [](auto &in) { return vec(ops::pad(in[0], {-1, 2, 0, 0})); });
  REQUIRE(out[0].shape() == Sizes{4, 2});
  HostTensor zero = HostTensor::scalar(DType::f32, 0);
  CHECK(out[0].identical(expect(x, {4, 2}, [](const Sizes &o) -> int64_t {
    return o[0] + 1 < 3 ? (o[0] + 1) * 2 + o[1] : -1;
  }, &zero)));
  // A crop that a bound symbolic dim cannot afford fails at run time.
  HostTensor small = random_of(DType::f32, {1, 2});
  MAXC_REQUIRE_ERROR(run_symbolic({TensorType(DType::f32, {Dim("n"), 2})}, {small},
                                  [](auto &in) { return vec(ops::pad(in[0], {-1, -1, 0, 0})); }),
                     ErrorCode::ShapeMismatch, "below zero");
  // Padding an empty tensor fills it.
  HostTensor e(DType::f32, {0, 2});
  CHECK(run1({e}, [](auto &in) { return ops::pad(in[0], {1, 0, 0, 0}, 3); }).to_f64() ==
        std::vector<double>{3, 3});
}

// ---------------------------------------------------------------- tile

TEST_CASE("tile inference, errors and results", "[ops][shape]") {
  auto tl = [](Sizes r) { return [r](const std::vector<Tensor> &in) { return vec(ops::tile(in[0], r)); }; };
  CHECK(type_str(infer({TensorType(DType::f32, {2, 3})}, tl({2, 3}))) == "f32[4,9]");
  CHECK(type_str(infer({TensorType(DType::f32, {Dim("batch"), 2})}, tl({3, 1}))) == "f32[3*batch,2]");
  CHECK(type_str(infer({TensorType(DType::f32, {2, 3})}, tl({0, 1}))) == "f32[0,3]");
  CHECK(type_str(infer({TensorType(DType::f32, {})}, tl({}))) == "f32[]");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 3})}, tl({2})), ErrorCode::InvalidAttribute,
                     "one entry per dim");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {2, 3})}, tl({1, -1})), ErrorCode::InvalidAttribute, "negative");

  HostTensor m = HostTensor::from_i64(DType::i64, {1, 2}, {1, 2});
  CHECK(run1({m}, [](auto &in) { return ops::tile(in[0], {2, 2}); }).to_i64() == Sizes{1, 2, 1, 2, 1, 2, 1, 2});
  for (DType dtype : kTestDTypes) {
    INFO(dtype_name(dtype));
    HostTensor x = random_of(dtype, {2, 1, 3});
    HostTensor y = run1({x}, [](auto &in) { return ops::tile(in[0], {2, 3, 1}); });
    CHECK(y.identical(expect(x, {4, 3, 3}, [](const Sizes &o) { return linear_of({o[0] % 2, 0, o[2]}, {2, 1, 3}); })));
    HostTensor z = run1({x}, [](auto &in) { return ops::tile(in[0], {1, 0, 2}); });
    CHECK(z.shape() == Sizes{2, 0, 6});
  }
  HostTensor x = random_of(DType::i32, {2, 3});
  auto out = run_symbolic({TensorType(DType::i32, {Dim("b"), 3})}, {x},
                          [](auto &in) { return vec(ops::tile(in[0], {2, 2})); });
  CHECK(out[0].identical(expect(x, {4, 6}, [](const Sizes &o) { return (o[0] % 2) * 3 + o[1] % 3; })));
}

// ---------------------------------------------------------------- exactness

TEST_CASE("shape ops copy i64 and NaN payloads bit-exactly", "[ops][shape]") {
  HostTensor big(DType::i64, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    big.data_as<int64_t>()[i] = (int64_t{1} << 62) + 2 * i + 1; // not representable as double
  HostTensor nan(DType::f32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) {
    uint32_t bits = 0x7fc00001u + static_cast<uint32_t>(i); // quiet NaNs with payloads
    std::memcpy(nan.data_as<float>() + i, &bits, 4);
  }
  HostTensor idx = HostTensor::from_i64(DType::i64, {2}, {2, 0});
  for (const HostTensor &x : {big, nan}) {
    auto outs = run_traced({x, idx}, [](auto &in) {
      return std::vector<Tensor>{ops::transpose(in[0]),
                                 ops::concat({in[0], in[0]}, 1),
                                 ops::slice(in[0], {2}, {kEnd}, {1}),
                                 ops::gather(in[0], in[1], 1),
                                 ops::pad(in[0], {0, 0, 1, 0}),
                                 ops::tile(in[0], {1, 2}),
                                 ops::broadcast_to(in[0], {2, 2, 3}),
                                 ops::split(in[0], {1, 2}, 1)[1]};
    });
    size_t es = dtype_size(x.dtype());
    auto same = [&](const HostTensor &t, int64_t ti, int64_t xi) {
      return std::memcmp(t.data() + ti * es, x.data() + xi * es, es) == 0;
    };
    CHECK(same(outs[0], 1, 3)); // transpose [3,2]: (0,1) <- x(1,0)
    CHECK(same(outs[1], 4, 1)); // concat [2,6]: (0,4) <- x(0,1)
    CHECK(same(outs[2], 1, 5)); // slice [2,1]: (1,0) <- x(1,2)
    CHECK(same(outs[3], 0, 2)); // gather [2,2]: (0,0) <- x(0,2)
    CHECK(same(outs[4], 7, 5)); // pad [2,4]: (1,3) <- x(1,2)
    CHECK(same(outs[5], 11, 5)); // tile [2,6]: (1,5) <- x(1,2)
    CHECK(same(outs[6], 10, 4)); // broadcast [2,2,3]: (1,1,1) <- x(1,1)
    CHECK(same(outs[7], 3, 5)); // split piece [2,2]: (1,1) <- x(1,2)
  }
}
