// matmul_nbits (maxc/Ops/MatmulNbits.h, weight-only int4/int8): the CPU
// kernel (Cpu/NbitsGemvEmitter: codes read in their bits, dequantized in
// registers) against the reference on fresh random inputs, at M = 1, 3,
// 16, 17, 18 and 21 rows (16 and more: the dequantized panel), K not a
// multiple of the block, N odd, bits 4 and 8, with and without zero points, the same bits on 1, 2 and 3 threads; the
// decomposition the GPU backends get, on the interpreter and under GPU
// emulation; the quantizer's round trip; bad operands and attributes.
//
// Tolerance rtol 1e-4, atol 1e-4: f32 FMAs in another order than the
// reference's double sums over K <= 100 terms of magnitude <= ~8.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Transforms/Decompose.h"

#include <cmath>

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-4;

struct Case {
  std::vector<int64_t> a; // [..., M, K]
  int64_t n, bits, block;
  bool zp;
  bool constant_weights = false;
};

std::string describe(const Case &c) {
  std::string s = "a [";
  for (int64_t d : c.a)
    s += std::to_string(d) + ",";
  return s + "] N" + std::to_string(c.n) + " bits" + std::to_string(c.bits) + " block" + std::to_string(c.block) +
         (c.zp ? " zp" : "") + (c.constant_weights ? " const" : "");
}

NbitsLayout layout_of(const Case &c) { return NbitsLayout{c.a.back(), c.n, c.bits, c.block}; }

/// A case's absolute tolerance: f32 sums over K of products (|a| <= 1,
/// |w| < 2^bits * 0.2) in another order than the reference's: kAtol, or
/// 1e-8 * K * 2^bits * 0.2 where that is more (an 8-bit B over K = 1500
/// once differed by 2.2e-4 on a result of 0.92).
double atol_of(const Case &c) {
  return std::max(kAtol, 1e-8 * static_cast<double>(c.a.back()) * std::ldexp(0.2, static_cast<int>(c.bits)));
}

/// Random codes, scales and zero points of a case's B.
std::vector<HostTensor> weights(const Case &c) {
  NbitsLayout l = layout_of(c);
  std::vector<HostTensor> w = {random_tensor(DType::u8, {l.n, l.blocks(), l.blob_bytes()}, 0, 255),
                               random_tensor(DType::f32, {l.n * l.blocks()}, -0.2, 0.2)};
  if (c.zp)
    w.push_back(random_tensor(DType::u8, {l.n * l.zp_row_bytes()}, 0, 255));
  return w;
}

std::unique_ptr<Graph> graph_of(const Case &c, const std::vector<HostTensor> &w, std::vector<HostTensor> &inputs) {
  inputs = {random_tensor(DType::f32, c.a, -1, 1)};
  if (!c.constant_weights)
    inputs.insert(inputs.end(), w.begin(), w.end());
  return trace_graph(types_of(inputs), [&](const std::vector<Tensor> &x) {
    std::vector<Tensor> ops_in = {x[0]};
    for (size_t i = 0; i < w.size(); ++i)
      ops_in.push_back(c.constant_weights ? Tensor::from_host(w[i], "w" + std::to_string(i)) : x[i + 1]);
    std::optional<Tensor> zp;
    if (ops_in.size() > 3)
      zp = ops_in[3];
    return std::vector<Tensor>{ops::matmul_nbits(ops_in[0], ops_in[1], ops_in[2], zp, c.a.back(), c.n, c.bits, c.block)};
  });
}

const std::vector<Case> &cases() {
  static const std::vector<Case> all = {
      {{1, 64}, 33, 4, 32, false},       {{1, 64}, 33, 4, 32, true},     {{3, 100}, 17, 4, 32, true},
      {{17, 100}, 9, 4, 16, false},      {{1, 70}, 35, 8, 32, false},    {{3, 70}, 21, 8, 64, true},
      {{2, 17, 48}, 5, 8, 16, true},     {{5, 40}, 7, 4, 128, true},     {{1, 96}, 3, 4, 32, true, true},
      {{3, 100}, 41, 8, 32, false, true}, {{100}, 11, 4, 32, true},
      {{6, 2100}, 3, 4, 32, true}, // 4 and 2 rows: A's rows past the split buffer (interleaved codes)
      // 16 rows and more: the dequantized panel (tiles of 8 rows, then single rows; 16-column tasks, a partial one)
      {{21, 100}, 37, 4, 32, true}, {{16, 70}, 21, 8, 64, true}, {{2, 9, 96}, 17, 4, 128, false},
      {{17, 2100}, 19, 4, 32, true}, {{16, 1500}, 7, 8, 128, false}, // K in slices of 1024 (the sums carried)
  };
  return all;
}

} // namespace

TEST_CASE("matmul_nbits: the CPU kernel matches the reference", "[codegen][nbits]") {
  for (const Case &c : cases()) {
    INFO(describe(c));
    std::vector<HostTensor> w = weights(c), in;
    std::unique_ptr<Graph> graph = graph_of(c, w, in);
    std::unique_ptr<Graph> lowered = decompose(*graph, [] {
      DecomposeOptions o;
      o.keep_matmul_nbits = true;
      return o;
    }());
    size_t whole = 0;
    for (const Node &n : lowered->nodes())
      whole += n.op == "matmul_nbits";
    CHECK(whole == 1); // the CPU keeps it whole
    std::vector<HostTensor> expected = Interpreter::run(*graph, in), got = run_compiled_threads(*graph, in);
    MAXC_REQUIRE_CLOSE(got[0], expected[0], kRtol, atol_of(c));
    // The primitives the GPU backends get.
    std::unique_ptr<Graph> primitives = decompose(*graph);
    for (const Node &n : primitives->nodes())
      REQUIRE(n.op != "matmul_nbits");
    MAXC_REQUIRE_CLOSE(Interpreter::run(*primitives, in)[0], expected[0], kRtol, atol_of(c));
  }
}

TEST_CASE("matmul_nbits: the reference dequantizes MatMulNBits' layout", "[ops][nbits]") {
  // K = 20, block 16, bits 4: two blocks, the second holding 4 codes. Row 0's
  // codes are k % 16, zero points packed 0x53 (block 0: 3, block 1: 5).
  NbitsLayout l{20, 1, 4, 16};
  HostTensor b(DType::u8, {1, 2, 8}), s(DType::f32, {2}), z(DType::u8, {1}), a(DType::f32, {1, 20});
  for (int64_t i = 0; i < 16; ++i)
    b.data_as<uint8_t>()[i] = static_cast<uint8_t>((2 * i % 16) | ((2 * i + 1) % 16) << 4);
  s.set_f64(0, 0.5), s.set_f64(1, 2.0);
  z.set_i64(0, 0x53);
  for (int64_t k = 0; k < 20; ++k)
    a.set_f64(k, k == 1 || k == 17 ? 1.0 : 0.0);
  std::unique_ptr<Graph> g = trace_graph(types_of({a, b, s, z}), [&](const std::vector<Tensor> &x) {
    return std::vector<Tensor>{ops::matmul_nbits(x[0], x[1], x[2], x[3], l.k, l.n, l.bits, l.block)};
  });
  // k = 1: code 1, zp 3, scale 0.5 -> -1; k = 17: code 1, zp 5, scale 2 -> -8.
  CHECK(Interpreter::run(*g, {a, b, s, z})[0].get_f64(0) == -9.0);
  // Without zero points: 8 each. (1 - 8) * 0.5 + (1 - 8) * 2 = -17.5.
  std::unique_ptr<Graph> g2 = trace_graph(types_of({a, b, s}), [&](const std::vector<Tensor> &x) {
    return std::vector<Tensor>{ops::matmul_nbits(x[0], x[1], x[2], std::nullopt, l.k, l.n, l.bits, l.block)};
  });
  CHECK(Interpreter::run(*g2, {a, b, s})[0].get_f64(0) == -17.5);
}

TEST_CASE("matmul_nbits: GPU emulation runs the decomposition", "[codegen][nbits][gpu]") {
  for (const Case &c : {Case{{3, 70}, 9, 4, 32, true}, Case{{1, 40}, 5, 8, 16, false}}) {
    INFO(describe(c));
    std::vector<HostTensor> w = weights(c), in;
    std::unique_ptr<Graph> graph = graph_of(c, w, in);
    MAXC_REQUIRE_CLOSE(run_emulated(*graph, in, "gfx942")[0], Interpreter::run(*graph, in)[0], kRtol, kAtol);
  }
}

TEST_CASE("matmul_nbits: quantize then dequantize stays within half a step", "[ops][nbits]") {
  for (int64_t bits : {4, 8})
    for (bool symmetric : {false, true}) {
      NbitsLayout l{50, 3, bits, 16};
      HostTensor w = random_tensor(DType::f32, {l.n, l.k}, -1, 1);
      NbitsWeight q = quantize_nbits(w.data_as<float>(), l, symmetric);
      CHECK(q.zero_points.valid() == !symmetric);
      std::vector<float> back = dequantize_nbits(l, q.b.data_as<uint8_t>(), q.scales.data_as<float>(),
                                                 symmetric ? nullptr : q.zero_points.data_as<uint8_t>());
      for (int64_t n = 0; n < l.n; ++n)
        for (int64_t k = 0; k < l.k; ++k) {
          float step = q.scales.data_as<float>()[n * l.blocks() + k / l.block];
          INFO("bits " << bits << " symmetric " << symmetric << " n " << n << " k " << k);
          CHECK(std::fabs(back[n * l.k + k] - w.data_as<float>()[n * l.k + k]) <= 0.5f * step * 1.0001f);
        }
    }
}

TEST_CASE("matmul_nbits: the quantizer's range search never raises a block's error", "[ops][nbits]") {
  // Heavy-tailed weights (a few outliers per block): clipping them pays.
  for (int64_t bits : {4, 8})
    for (bool symmetric : {false, true}) {
      NbitsLayout l{100, 7, bits, 32};
      HostTensor w = random_tensor(DType::f32, {l.n, l.k}, -1, 1);
      float *wd = w.data_as<float>();
      for (int64_t i = 0; i < l.n * l.k; i += 29)
        wd[i] *= 6;
      auto errors = [&](bool search) {
        NbitsWeight q = quantize_nbits(wd, l, symmetric, search);
        std::vector<float> back = dequantize_nbits(l, q.b.data_as<uint8_t>(), q.scales.data_as<float>(),
                                                   symmetric ? nullptr : q.zero_points.data_as<uint8_t>());
        std::vector<double> e(static_cast<size_t>(l.n * l.blocks()));
        for (int64_t n = 0; n < l.n; ++n)
          for (int64_t k = 0; k < l.k; ++k) {
            double d = static_cast<double>(back[n * l.k + k]) - wd[n * l.k + k];
            e[n * l.blocks() + k / l.block] += d * d;
          }
        return e;
      };
      std::vector<double> plain = errors(false), searched = errors(true);
      double total_plain = 0, total_searched = 0;
      for (size_t i = 0; i < plain.size(); ++i) {
        INFO("bits " << bits << " symmetric " << symmetric << " block " << i);
        CHECK(searched[i] <= plain[i] * (1 + 1e-12));
        total_plain += plain[i], total_searched += searched[i];
      }
      if (bits == 4) // some block finds a better range
        CHECK(total_searched < total_plain);
    }
}

TEST_CASE("matmul_nbits: bad operands and attributes are clear errors", "[ops][nbits]") {
  TensorType a(DType::f32, {Dim(1), Dim(64)}), b(DType::u8, {Dim(8), Dim(2), Dim(16)}), s(DType::f32, {Dim(16)});
  auto expect = [&](std::vector<TensorType> t, int64_t bits, int64_t block, const std::string &what) {
    try {
      trace_graph(t, [&](const std::vector<Tensor> &x) {
        std::optional<Tensor> zp;
        if (x.size() > 3)
          zp = x[3];
        return std::vector<Tensor>{ops::matmul_nbits(x[0], x[1], x[2], zp, 64, 8, bits, block)};
      });
      FAIL("accepted: " << what);
    } catch (const Error &e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("matmul_nbits") != std::string::npos);
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  expect({a, TensorType(DType::u8, {Dim(8), Dim(2), Dim(8)}), s}, 4, 32, "must be [N, ceil(K / block_size)");
  expect({a, b, s}, 3, 32, "bits 3");
  expect({a, b, s}, 4, 8, "block_size 8");
  expect({a, TensorType(DType::i8, {Dim(8), Dim(2), Dim(16)}), s}, 4, 32, "b");
  expect({a, b, TensorType(DType::f32, {Dim(15)})}, 4, 32, "scales");
  expect({a, b, TensorType(DType::f16, {Dim(16)})}, 4, 32, "scales");
  expect({a, b, s, TensorType(DType::u8, {Dim(16)})}, 4, 32, "zero_points");
  expect({TensorType(DType::f32, {Dim(1), Dim(63)}), b, s}, 4, 32, "K = 64");
}
