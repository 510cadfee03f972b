// The canonicalization rule dequantized-matmul (Transforms/DequantizedMatmul.h):
// a matmul of an 8-bit constant dequantized per run becomes matmul_nbits on
// the codes. Golden tests (the op list, the codes read where they lie) with
// the results of the original graph's reference run on random inputs, on
// the CPU too, and near misses that stay as they are. Also the CPU's
// elementwise kernels that read a stored one-element value (the scale of a
// dynamic quantization), which load it once per task.
#include "TestUtil.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Transforms/Canonicalize.h"

using namespace maxc;
using namespace maxc::test;

namespace {

using T = std::vector<Tensor>;

std::string ops_of(const Graph &g) {
  std::string out;
  for (const Node &n : g.nodes())
    if (n.op != "constant" && n.op != "full")
      out += (out.empty() ? "" : " ") + n.op;
  return out;
}

/// DequantizeLinear as the ONNX importer spells it: f32(i32(q) - i32(zp)) * s
/// (no zero point: f32(i32(q)) * s).
Tensor dequant(const Tensor &q, const std::optional<Tensor> &zp, const Tensor &s) {
  Tensor v = ops::cast(q, DType::i32);
  if (zp)
    v = ops::sub(v, ops::cast(*zp, DType::i32));
  return ops::mul(ops::cast(v, DType::f32), s);
}

HostTensor scalar_of(DType d, double v) {
  HostTensor t(d, {});
  t.set_f64(0, v);
  return t;
}

struct Rewritten {
  std::unique_ptr<Graph> before, after;
  RewriteStats stats;
};

Rewritten rewrite(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  Rewritten r;
  r.before = trace_graph(types_of(inputs), build);
  r.after = canonicalize(*r.before, &r.stats);
  if (r.after)
    r.after->verify();
  return r;
}

/// The rewritten graph's reference and the compiled CPU code on the original
/// graph against the original's reference (the weights agree within an ulp of
/// each product; the sums within f32 rounding).
void check_values(const Rewritten &r, const std::vector<HostTensor> &inputs) {
  auto want = Interpreter::run(*r.before, inputs);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*r.after, inputs)[0], want[0], 1e-5, 1e-5);
  MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *r.before, inputs)[0], want[0], 1e-5, 1e-5);
}

} // namespace

TEST_CASE("dequantized-matmul: Whisper's tied embedding (u8 [N, K], transposed, per-tensor scale)",
          "[transforms][canonicalize][nbits]") {
  HostTensor q = random_tensor(DType::u8, {40, 64}, 0, 255), x = random_tensor(DType::f32, {1, 3, 64});
  HostTensor ids = HostTensor::from_i64(DType::i64, {2}, {3, 7});
  auto build = [&](auto &in) {
    Tensor w = Tensor::from_host(q, "embed"), zp = Tensor::from_host(scalar_of(DType::u8, 131), "zp");
    Tensor s = Tensor::from_host(scalar_of(DType::f32, 0.0123), "scale");
    Tensor logits = ops::matmul(in[0], dequant(ops::transpose(w, {1, 0}), zp, s));
    // The embedding read by a gather too (the codes are shared, not copied).
    return T{logits, dequant(ops::gather(w, in[1]), zp, s)};
  };
  Rewritten r = rewrite({x, ids}, build);
  REQUIRE(r.after);
  CHECK(r.stats.fired["dequantized-matmul"] == 1);
  CHECK(ops_of(*r.after).find("matmul_nbits") != std::string::npos);
  CHECK(ops_of(*r.after).find("transpose") == std::string::npos);
  const Node *nbits = nullptr;
  for (const Node &n : r.after->nodes())
    if (n.op == kMatmulNbitsOp)
      nbits = &n;
  REQUIRE(nbits);
  CHECK(nbits->attrs.get_int("bits") == 8);
  CHECK(nbits->attrs.get_int("block_size") == 64);
  CHECK(nbits->operands.size() == 4); // zero point 131, not the default 128
  const Node *codes = &r.after->nodes()[static_cast<size_t>(r.after->value_info(nbits->operands[1]).producer)];
  REQUIRE(codes->op == "constant");
  CHECK(r.after->constant(codes->attrs.get_string("name")).data() == r.before->constant("embed").data());
  check_values(r, {x, ids});
}

TEST_CASE("dequantized-matmul: i8 [K, N], per-column scale and zero point, K off the block, transpose_b",
          "[transforms][canonicalize][nbits]") {
  const int64_t K = 40, N = 24;
  HostTensor q = random_tensor(DType::i8, {K, N}, -128, 127), x = random_tensor(DType::f32, {5, K});
  HostTensor s = random_tensor(DType::f32, {N}, 0.01, 0.1), zp = random_tensor(DType::i8, {N}, -20, 20);
  SECTION("per column, [K, N]") {
    Rewritten r = rewrite({x}, [&](auto &in) {
      return T{ops::matmul(in[0], dequant(Tensor::from_host(q), Tensor::from_host(zp), Tensor::from_host(s)))};
    });
    REQUIRE(r.after);
    CHECK(ops_of(*r.after) == "matmul_nbits");
    check_values(r, {x});
  }
  SECTION("no zero point, [N, K] read through transpose_b, one row") {
    HostTensor qnk = random_tensor(DType::i8, {N, K}, -128, 127), s1 = random_tensor(DType::f32, {N, 1}, 0.01, 0.1);
    HostTensor v = random_tensor(DType::f32, {1, K});
    Rewritten r = rewrite({v}, [&](auto &in) {
      return T{ops::matmul(in[0], dequant(Tensor::from_host(qnk), std::nullopt, Tensor::from_host(s1)), false, true)};
    });
    REQUIRE(r.after);
    CHECK(ops_of(*r.after) == "matmul_nbits");
    check_values(r, {v});
  }
}

TEST_CASE("dequantized-matmul near misses stay a matmul", "[transforms][canonicalize][nbits]") {
  const int64_t K = 32, N = 16;
  HostTensor q = random_tensor(DType::u8, {K, N}, 0, 255), x = random_tensor(DType::f32, {2, K});
  auto has_nbits = [](const Rewritten &r) { return r.after && ops_of(*r.after).find("matmul_nbits") != std::string::npos; };
  auto zp = [] { return Tensor::from_host(scalar_of(DType::u8, 128)); };
  // A scale per row of K (along the contraction axis).
  HostTensor sk = random_tensor(DType::f32, {K, 1}, 0.01, 0.1);
  CHECK_FALSE(has_nbits(rewrite({x}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), Tensor::from_host(sk)))};
  })));
  // More rows than a GEMV's (17).
  HostTensor x17 = random_tensor(DType::f32, {17, K});
  CHECK_FALSE(has_nbits(rewrite({x17}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  })));
  // A scale that is no constant (an input).
  HostTensor s = scalar_of(DType::f32, 0.5);
  CHECK_FALSE(has_nbits(rewrite({x, s}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), in[1]))};
  })));
  // An 8-bit subtraction (wraps: not a dequantization).
  CHECK_FALSE(has_nbits(rewrite({x}, [&](auto &in) {
    Tensor d = ops::cast(ops::sub(Tensor::from_host(q), zp()), DType::f32);
    return T{ops::matmul(in[0], ops::mul(d, Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  })));
  // Codes that are no constant.
  HostTensor qin = random_tensor(DType::u8, {K, N}, 0, 255);
  CHECK_FALSE(has_nbits(rewrite({x, qin}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(in[1], zp(), Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  })));
}

TEST_CASE("an elementwise kernel reading a stored one-element value (a dynamic quantization)", "[codegen][nbits]") {
  HostTensor x = random_tensor(DType::f32, {3, 50, 40}, -3, 3);
  auto build = [](auto &in) {
    Tensor zero = ops::full(0.0, DType::f32);
    Tensor lo = ops::minimum(ops::min(in[0], {}), zero), hi = ops::maximum(ops::max(in[0], {}), zero);
    Tensor scale = ops::div(ops::sub(hi, lo), ops::full(255.0, DType::f32));
    Tensor zp = ops::round(ops::sub(zero, ops::div(lo, scale)));
    Tensor q = ops::cast(ops::minimum(ops::maximum(ops::round(ops::div(in[0], scale)) + zp, zero),
                                      ops::full(255.0, DType::f32)),
                         DType::u8);
    return T{q, scale};
  };
  std::unique_ptr<Graph> g = trace_graph(types_of({x}), build);
  auto want = Interpreter::run(*g, {x});
  for (int threads : {1, 2}) {
    auto got = driver::run_on_host("cpu", *g, {x}, {}, 2, threads);
    MAXC_REQUIRE_CLOSE(got[0], want[0], 0, 0);
    MAXC_REQUIRE_CLOSE(got[1], want[1], 0, 0);
  }
}
