// The integer GEMM (Cpu/GemmEmitter.h: emit_gemm_i8): an i32 matmul of
// 8-bit values widened by casts, B a constant packed at compile time, bit
// for bit against the reference interpreter, for every signedness (u8/i8 A
// times u8/i8 B) at odd sizes: M = 1 and rows left over after the tiles, N
// not a multiple of the panel, K not a multiple of 4, a batched A; with
// zero points (0, 128, 255) folded as MatMulInteger folds them (A's row
// sums, B's shifted column sums) against the direct (a - a_zp) @ (b -
// b_zp); compiled for the host (VNNI here: vpdpbusd), AVX-VNNI's 8 lanes
// (alderlake, where the host runs it), vpdpbusd on 256-bit vectors with
// AVX512-VNNI+VL, AVX2 (haswell: vpmaddwd) and the portable IR (x86-64: 4
// lanes); 1 and 2 threads.
#include "CompiledRunner.h"

#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <array>
#include <memory>

using namespace maxc;
using namespace maxc::test;

namespace {

/// A configuration to compile for that this host runs: a CPU, and the
/// kernels' lanes and integer dot product (0, -1: the CPU's).
struct Config {
  std::string cpu;
  unsigned lanes = 0;
  int int8_dot = -1;
};

std::vector<Config> int8_configs() {
  std::vector<Config> out = {{"native"}};
  llvm::Triple host(llvm::sys::getProcessTriple());
  if (host.getArch() != llvm::Triple::x86_64)
    return out;
  llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures();
  bool haswell = f.lookup("avx2") && f.lookup("fma") && f.lookup("bmi2") && f.lookup("f16c") && f.lookup("movbe") &&
                 f.lookup("lzcnt");
  if (haswell)
    out.push_back({"haswell"});
  if (haswell && f.lookup("avxvnni"))
    out.push_back({"alderlake"});
  // vpdpbusd on 256-bit vectors (AVX512-VNNI with VL, as AVX-VNNI).
  if (f.lookup("avx512vnni") && f.lookup("avx512vl"))
    out.push_back({"native", 8, static_cast<int>(kInt8DotVnni)});
  out.push_back({"x86-64"});
  return out;
}

size_t int8_gemm_tasks(const Graph &graph) {
  return count_model_functions(graph, [](llvm::StringRef name) { return name.starts_with("m.gemm_i8."); });
}

HostTensor full_range(DType dtype, std::vector<int64_t> shape) {
  return dtype == DType::u8 ? random_tensor(dtype, std::move(shape), 0, 255)
                            : random_tensor(dtype, std::move(shape), -128, 127);
}

Shape static_shape(const std::vector<int64_t> &dims) {
  Shape s;
  for (int64_t d : dims)
    s.push_back(Dim(d));
  return s;
}

/// Column sums of (w - w_zp) as an i32 constant [N].
HostTensor shifted_column_sums(const HostTensor &w, int64_t zp) {
  int64_t k = w.shape()[0], n = w.shape()[1];
  HostTensor out(DType::i32, {n});
  for (int64_t j = 0; j < n; ++j) {
    int64_t s = 0;
    for (int64_t r = 0; r < k; ++r)
      s += w.get_i64(r * n + j) - zp;
    out.set_i64(j, s);
  }
  return out;
}

/// Random integer weights in [lo, hi] minus zp, as f32 (a conv's shifted weight).
HostTensor random_shifted_weight(std::vector<int64_t> shape, int64_t lo, int64_t hi, int64_t zp) {
  HostTensor w = random_tensor(DType::i32, std::move(shape), static_cast<double>(lo), static_cast<double>(hi));
  HostTensor shifted(DType::f32, w.shape());
  for (int64_t i = 0; i < w.numel(); ++i)
    shifted.set_f64(i, static_cast<double>(w.get_i64(i) - zp));
  return shifted;
}

/// QLinearConv's requantization of an integer-valued f32 y: round(y * m) +
/// zp, saturated, cast to u8 / i8.
Tensor requantized(const Tensor &y, double m, double zp, DType dtype) {
  Tensor q = ops::add(ops::round(ops::mul(y, ops::scalar(m, DType::f32))), ops::scalar(zp, DType::f32));
  double lo = dtype == DType::u8 ? 0 : -128, hi = dtype == DType::u8 ? 255 : 127;
  return ops::cast(ops::minimum(ops::maximum(q, ops::scalar(lo, DType::f32)), ops::scalar(hi, DType::f32)), dtype);
}

/// A conv of 8-bit activations (x - x_zp, full range) with random integer
/// weights in [w_lo, w_hi], its sums requantized or dequantized (`out`).
struct QConv {
  DType x;
  int64_t c, h, w, o, kh, kw, stride;
  std::array<int64_t, 4> pad; // top, left, bottom, right
  int64_t x_zp, w_lo, w_hi;
  int out; // 0: to u8, 1: to i8 (QConvGraph's multipliers and zero points), 2: f32 (times 0.5)
};

/// One image per conv (its input in `inputs`), the graph of all of them.
struct QConvGraph {
  std::vector<HostTensor> inputs;
  std::unique_ptr<Graph> graph;
  QConvGraph(const std::vector<QConv> &convs, double u8_multiplier, double u8_zp, double i8_multiplier, double i8_zp) {
    std::vector<TensorType> types;
    std::vector<HostTensor> weights;
    for (const QConv &cv : convs) {
      types.emplace_back(cv.x, static_shape({1, cv.c, cv.h, cv.w}));
      inputs.push_back(full_range(cv.x, {1, cv.c, cv.h, cv.w}));
      weights.push_back(random_shifted_weight({cv.o, cv.c, cv.kh, cv.kw}, cv.w_lo, cv.w_hi, 0));
    }
    graph = trace_graph(types, [&](auto &in) {
      std::vector<Tensor> out;
      for (size_t i = 0; i < convs.size(); ++i) {
        const QConv &cv = convs[i];
        ops::Conv2dOptions opts;
        opts.stride = {cv.stride, cv.stride};
        opts.padding = {cv.pad[0], cv.pad[1], cv.pad[2], cv.pad[3]};
        opts.exact = true;
        Tensor x = ops::sub(ops::cast(in[i], DType::f32),
                            ops::cast(ops::scalar(static_cast<double>(cv.x_zp), cv.x), DType::f32));
        Tensor y = ops::conv2d(x, Tensor::from_host(weights[i], "w" + std::to_string(i)), std::nullopt, opts);
        y = ops::cast(ops::cast(y, DType::i32), DType::f32);
        out.push_back(cv.out == 2   ? ops::mul(y, ops::scalar(0.5, DType::f32))
                      : cv.out == 0 ? requantized(y, u8_multiplier, u8_zp, DType::u8)
                                    : requantized(y, i8_multiplier, i8_zp, DType::i8));
      }
      return out;
    });
  }
};

/// `graph` compiled for every configuration, at 1 and 2 threads, equals
/// `expected` bit for bit.
void check_configs(const Graph &graph, const std::vector<HostTensor> &inputs, const std::vector<HostTensor> &expected,
                   size_t max_configs = ~size_t(0)) {
  std::vector<Config> configs = int8_configs();
  configs.resize(std::min(configs.size(), max_configs));
  for (const Config &config : configs) {
    INFO("cpu " << config.cpu << ", lanes " << config.lanes << ", dot " << config.int8_dot);
    JitCompiledGraph compiled(graph, config.cpu, config.lanes, config.int8_dot);
    for (int threads : {1, 2})
      REQUIRE(bitwise_mismatch(compiled.run_threads(inputs, threads), expected).empty());
  }
}

} // namespace

TEST_CASE("integer GEMM: u8/i8 x u8/i8 at odd sizes, bit for bit, every CPU path", "[codegen][qgemm]") {
  struct Size {
    std::vector<int64_t> a; // A's shape: [..., M, K]
    int64_t n;
  };
  const std::vector<Size> sizes = {{{1, 13}, 37}, {{7, 8}, 33}, {{13, 65}, 70}, {{6, 3}, 5}, {{2, 5, 31}, 64}};
  const DType dtypes[] = {DType::u8, DType::i8};
  // One graph (one compile per CPU path): a GEMM per signedness and size,
  // the A inputs shared by the two B dtypes.
  std::vector<TensorType> types;
  std::vector<HostTensor> inputs, weights;
  for (DType adt : dtypes)
    for (const Size &s : sizes) {
      types.emplace_back(adt, static_shape(s.a));
      inputs.push_back(full_range(adt, s.a));
    }
  for (DType bdt : dtypes)
    for (const Size &s : sizes)
      weights.push_back(full_range(bdt, {s.a.back(), s.n}));
  auto graph = trace_graph(types, [&](auto &x) {
    std::vector<Tensor> out;
    for (size_t ai = 0; ai < x.size(); ++ai)
      for (size_t bi = ai % sizes.size(); bi < weights.size(); bi += sizes.size())
        out.push_back(ops::matmul(ops::cast(x[ai], DType::i32),
                                  ops::cast(Tensor::from_host(weights[bi], "w" + std::to_string(ai) + "." +
                                                                               std::to_string(bi)),
                                            DType::i32)));
    return out;
  });
  REQUIRE(int8_gemm_tasks(*graph) == 4); // one per signedness
  check_configs(*graph, inputs, Interpreter::run(*graph, inputs));
}

TEST_CASE("integer GEMM with zero points 0, 128, 255 folded into row and column sums", "[codegen][qgemm]") {
  const int64_t m = 9, k = 23, n = 41;
  const std::vector<int64_t> zps = {0, 128, 255};
  auto i32 = [](const Tensor &t) { return ops::cast(t, DType::i32); };
  auto scalar = [](int64_t v) { return ops::scalar(static_cast<double>(v), DType::i32); };
  // Zero points as the dtypes hold them: 0/128/255 for u8, -128/0/127 for i8.
  auto zp_of = [](DType d, int64_t zp) { return d == DType::u8 ? zp : zp - 128; };
  const DType dtypes[] = {DType::u8, DType::i8};
  std::vector<HostTensor> weights;
  for (size_t i = 0; i < 2 * zps.size(); ++i)
    weights.push_back(full_range(i < zps.size() ? DType::i8 : DType::u8, {k, n}));
  // Per A dtype (input) and zero point: B of the other signedness, zero
  // points a_zp = zps[i] and b_zp = zps[reversed].
  auto build = [&](bool fold) {
    return trace_graph({TensorType(DType::u8, {m, k}), TensorType(DType::i8, {m, k})}, [&](auto &x) {
      std::vector<Tensor> out;
      for (size_t t = 0; t < 2; ++t)
        for (size_t i = 0; i < zps.size(); ++i) {
          DType adt = dtypes[t], bdt = dtypes[1 - t];
          int64_t a_zp = zp_of(adt, zps[i]), b_zp = zp_of(bdt, zps[zps.size() - 1 - i]);
          const HostTensor &w = weights[t * zps.size() + i];
          std::string name = "w" + std::to_string(t * zps.size() + i);
          if (!fold) {
            out.push_back(ops::matmul(ops::sub(i32(x[t]), scalar(a_zp)),
                                      ops::sub(i32(Tensor::from_host(w, name)), scalar(b_zp))));
            continue;
          }
          // MatMulInteger's composition: A @ B - b_zp * rowsum(A) - a_zp * colsum(B - b_zp).
          Tensor y = ops::matmul(i32(x[t]), i32(Tensor::from_host(w, name)));
          y = ops::sub(y, ops::mul(ops::sum(i32(x[t]), {1}, true), scalar(b_zp)));
          y = ops::sub(y, ops::mul(scalar(a_zp), Tensor::from_host(shifted_column_sums(w, b_zp), name + ".sums")));
          out.push_back(y);
        }
      return out;
    });
  };
  auto folded = build(true), direct = build(false);
  REQUIRE(int8_gemm_tasks(*folded) == 2); // u8 x i8, i8 x u8
  std::vector<HostTensor> x = {full_range(DType::u8, {m, k}), full_range(DType::i8, {m, k})};
  // The kernel paths are the first test's; the folding on two of them
  // (the host's and the portable target's AVX2, where the host runs it).
  check_configs(*folded, x, Interpreter::run(*direct, x), 2);
}

TEST_CASE("integer GEMM with a symbolic number of rows", "[codegen][qgemm]") {
  const int64_t k = 45, n = 50;
  HostTensor w = full_range(DType::i8, {k, n});
  auto graph = trace_graph({TensorType(DType::i8, {Dim("m"), k})}, [&](auto &x) {
    return std::vector<Tensor>{ops::matmul(ops::cast(x[0], DType::i32), ops::cast(Tensor::from_host(w, "w"), DType::i32))};
  });
  REQUIRE(int8_gemm_tasks(*graph) == 1);
  JitCompiledGraph compiled(*graph);
  for (int64_t m : {1, 7, 100}) {
    INFO("M " << m);
    HostTensor x = full_range(DType::i8, {m, k});
    std::vector<HostTensor> expected = Interpreter::run(*graph, {x});
    for (int threads : {1, 2})
      REQUIRE(bitwise_mismatch(compiled.run_threads({x}, threads), expected).empty());
  }
}

TEST_CASE("integer GEMM weights of a subgraph packed per call site", "[codegen][qgemm][gemm-panels]") {
  // Two calls of one block (a dynamically quantized layer's shape: the
  // 8-bit weight, its zero point and column sums are parameters), each
  // binding the weight to a constant of its own: the block's integer GEMM
  // reads the weight packed at each call site. Not packed (the loop nest on
  // the widened values instead): the second call binds a graph input; the
  // block also sums the widened weight (another reader).
  const int64_t m = 7, k = 37, n = 21;
  for (DType bdt : {DType::u8, DType::i8})
    for (int variant : {0, 1, 2}) {
      INFO("B " << dtype_name(bdt) << ", variant " << variant);
      auto block = [variant](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
        Tensor wi = ops::cast(p.at("w"), DType::i32);
        Tensor y = ops::matmul(ops::cast(args[0], DType::i32), wi);
        y = ops::sub(y, ops::mul(ops::sum(ops::cast(args[0], DType::i32), {1}, true), ops::cast(p.at("zp"), DType::i32)));
        if (variant == 2)
          y = ops::add(y, ops::sum(wi, {0}));
        return TensorTree(ops::sub(y, p.at("colsum")));
      };
      Graph graph("g", {TensorType(DType::u8, {m, k}), TensorType(bdt, {k, n})});
      {
        GraphRealizationContext ctx(graph);
        Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
        std::vector<Value> outs;
        for (int i = 0; i < 2; ++i) {
          CallOptions options;
          options.instance = "layers." + std::to_string(i);
          options.name = "Block";
          Tensor w = variant == 1 && i == 1 ? Tensor::from_graph_value(graph.inputs()[1])
                                            : Tensor::from_host(full_range(bdt, {k, n}));
          NamedTensors params = {{"w", w},
                                 {"zp", Tensor::from_host(full_range(bdt, {}))},
                                 {"colsum", Tensor::from_host(random_tensor(DType::i32, {n}, -3000, 3000))}};
          outs.push_back(ctx.call(options, block, {x}, params).tensor().value());
        }
        graph.output(outs);
      }
      REQUIRE(graph.subgraphs().size() == 1);
      CHECK(int8_gemm_tasks(graph) == (variant == 0 ? 1u : 0u));
      std::vector<HostTensor> in = {full_range(DType::u8, {m, k}), full_range(bdt, {k, n})};
      std::vector<HostTensor> expected = Interpreter::run(graph, in);
      JitCompiledGraph compiled(graph);
      for (int threads : {1, 2})
        REQUIRE(bitwise_mismatch(compiled.run_threads(in, threads), expected).empty());
    }
}

// Integer convs (Cpu/ConvEmitter.h: emit_conv_i8): the importer's exact f32
// conv of 8-bit activations minus their zero point (ConvInteger), weights w
// - w_zp known (f32 integers, up to 255 apart per output channel), through
// the byte im2col (the padding the zero point) and the integer GEMM; bit for
// bit against the reference: u8 and i8 activations, zero points 0/128/255
// (as the dtype holds them), u8 and i8 weights with their zero points, 3x3
// padded, stride 2, dilation 2, 5x3 unpadded, K not a multiple of 4; with
// and without an epilogue (cast, scale, bias, relu); three chunks of input
// channels (slices of the shifted activation) summed in i32.
TEST_CASE("integer conv: k x k ConvInteger through the integer GEMM, bit for bit", "[codegen][qgemm]") {
  struct Conv {
    DType x;
    int64_t c, h, w, o, kh, kw;
    std::vector<int64_t> stride, pad, dilation;
    DType wdt;
    int64_t w_zp;
  };
  const std::vector<Conv> convs = {
      {DType::u8, 8, 9, 11, 19, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, DType::u8, 131},
      {DType::u8, 5, 12, 10, 33, 3, 3, {2, 2}, {1, 0, 1, 2}, {1, 1}, DType::i8, 0},
      {DType::i8, 4, 13, 13, 16, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, DType::u8, 255},
      {DType::i8, 3, 7, 9, 7, 5, 3, {1, 2}, {0, 0, 0, 0}, {1, 1}, DType::i8, -128},
  };
  const std::vector<int64_t> zps = {0, 128, 255};
  std::vector<TensorType> types;
  std::vector<HostTensor> inputs, weights;
  for (const Conv &cv : convs) {
    types.emplace_back(cv.x, static_shape({2, cv.c, cv.h, cv.w}));
    inputs.push_back(full_range(cv.x, {2, cv.c, cv.h, cv.w}));
    HostTensor w = full_range(cv.wdt, {cv.o, cv.c, cv.kh, cv.kw});
    HostTensor shifted(DType::f32, w.shape());
    for (int64_t i = 0; i < w.numel(); ++i)
      shifted.set_f64(i, static_cast<double>(w.get_i64(i) - cv.w_zp));
    weights.push_back(shifted);
  }
  // Conv i's zero point zps[i % 3] (none for the last: the cast alone).
  for (size_t i = 0; i < convs.size(); ++i) {
    types.emplace_back(convs[i].x, Shape{});
    HostTensor z(convs[i].x, {});
    z.set_i64(0, convs[i].x == DType::u8 ? zps[i % 3] : zps[i % 3] - 128);
    inputs.push_back(z);
  }
  auto graph = trace_graph(types, [&](auto &in) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < convs.size(); ++i) {
      const Conv &cv = convs[i];
      ops::Conv2dOptions opts;
      opts.stride = cv.stride;
      opts.padding = cv.pad;
      opts.dilation = cv.dilation;
      opts.exact = true;
      auto x = [&] {
        Tensor xf = ops::cast(in[i], DType::f32);
        return i + 1 == convs.size() ? xf : ops::sub(xf, ops::cast(in[convs.size() + i], DType::f32));
      };
      out.push_back(ops::conv2d(x(), Tensor::from_host(weights[i], "w" + std::to_string(i)), std::nullopt, opts));
      // Dequantized as after a ConvInteger (the plan's epilogue: the kernel
      // writes only the chain's value).
      if (i % 2 == 0) {
        Tensor y = ops::conv2d(x(), Tensor::from_host(weights[i], "w" + std::to_string(i) + ".epi"), std::nullopt, opts);
        y = ops::cast(ops::cast(y, DType::i32), DType::f32);
        out.push_back(ops::relu(ops::add(ops::mul(y, ops::scalar(0.0625, DType::f32)), ops::scalar(-3, DType::f32))));
      }
    }
    // The importer's chunks of input channels (OnnxQuantized.cpp: f32
    // exactness), each a slice of the shifted activation, summed in i32.
    Tensor xs = ops::sub(ops::cast(in[0], DType::f32), ops::cast(in[convs.size()], DType::f32));
    ops::Conv2dOptions opts;
    opts.padding = {1, 1, 1, 1};
    opts.exact = true;
    std::optional<Tensor> sum;
    for (int64_t c0 : {0, 3, 5}) {
      int64_t c1 = c0 == 5 ? 8 : c0 == 3 ? 5 : 3;
      HostTensor w(DType::f32, {6, c1 - c0, 3, 3});
      for (int64_t j = 0; j < w.numel(); ++j)
        w.set_f64(j, static_cast<double>(((j * 37 + c0) % 256) - 128));
      Tensor y = ops::cast(ops::conv2d(ops::slice(xs, {c0}, {c1}, {1}), Tensor::from_host(w, "chunk" + std::to_string(c0)),
                                       std::nullopt, opts),
                           DType::i32);
      sum = sum ? ops::add(*sum, y) : y;
    }
    out.push_back(ops::mul(ops::cast(*sum, DType::f32), ops::scalar(0.5, DType::f32)));
    return out;
  });
  REQUIRE(count_model_functions(*graph, [](llvm::StringRef name) { return name.starts_with("m.pack_i8"); }) ==
          convs.size() + (convs.size() + 1) / 2 + 3);
  // The GEMM's kernel paths are the first test's (u8 x i8 among them); the
  // conv on two of them (the host's and AVX2).
  check_configs(*graph, inputs, Interpreter::run(*graph, inputs), 2);
}

// The integer conv's requantization (a QLinearConv's: multiplier, round
// half to even, zero point, saturation, the cast to u8/i8) in the integer
// GEMM's tile write-back, and convs whose byte im2col exceeds
// kConvInt8BlockBytes run in blocks of output rows (the last one shorter):
// multipliers 0.5 and 0.25 put many sums on ties (+-0.5), the sums' spread
// saturates both ends (1/1024 and 1/4096 keep the offset rows' large sums
// in range), output zero points 0/128/255 (u8) and -128/0 (i8);
// weight rows with and without offsets (the columns' sums); 19 channels
// (tiles of 8, 8, 2, 1 rows).
TEST_CASE("integer conv: requantized in the GEMM's write-back, in blocks of rows", "[codegen][qgemm]") {
  struct Conv {
    DType x;
    int64_t c, hw, o, x_zp;
    int64_t w_lo, w_hi, w_zp; // weights in [w_lo, w_hi], shifted by w_zp
    double multiplier;
    DType y;
    int64_t y_zp;
    int64_t stride;
  };
  const std::vector<Conv> convs = {
      {DType::u8, 16, 47, 19, 128, -2, 2, 0, 0.5, DType::u8, 0, 1},     // blocks of 24, 23 rows
      {DType::u8, 16, 47, 19, 255, -3, 3, 0, 0.25, DType::u8, 128, 1},  // blocks
      {DType::i8, 16, 47, 19, 0, 100, 140, 0, 1.0 / 1024, DType::i8, -128, 1}, // blocks; offsets
      {DType::u8, 5, 11, 19, 0, 0, 255, 250, 1.0 / 4096, DType::u8, 255, 2},   // whole image; offsets
      {DType::i8, 5, 11, 7, -128, -2, 2, 0, 0.5, DType::i8, 0, 1},       // whole image
  };
  std::vector<TensorType> types;
  std::vector<HostTensor> inputs, weights;
  for (const Conv &cv : convs) {
    types.emplace_back(cv.x, static_shape({1, cv.c, cv.hw, cv.hw}));
    inputs.push_back(full_range(cv.x, {1, cv.c, cv.hw, cv.hw}));
    weights.push_back(random_shifted_weight({cv.o, cv.c, 3, 3}, cv.w_lo, cv.w_hi, cv.w_zp));
  }
  auto graph = trace_graph(types, [&](auto &in) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < convs.size(); ++i) {
      const Conv &cv = convs[i];
      ops::Conv2dOptions opts;
      opts.stride = {cv.stride, cv.stride};
      opts.padding = {1, 1, 1, 1};
      opts.exact = true;
      Tensor x = ops::sub(ops::cast(in[i], DType::f32), ops::cast(ops::scalar(static_cast<double>(cv.x_zp), cv.x), DType::f32));
      Tensor y = ops::conv2d(x, Tensor::from_host(weights[i], "w" + std::to_string(i)), std::nullopt, opts);
      y = ops::cast(ops::cast(y, DType::i32), DType::f32);
      out.push_back(requantized(y, cv.multiplier, static_cast<double>(cv.y_zp), cv.y));
    }
    return out;
  });
  REQUIRE(count_model_functions(*graph, [](llvm::StringRef name) { return name.starts_with("m.conv_i8"); }) == 3);
  {
    // The sums are below 2^24 here (the known weights bound them): the
    // epilogue's cast of their f32 back to i32 is the integer itself.
    llvm::LLVMContext context;
    auto module = build_model_module(*graph, "m", context);
    size_t round_trips = 0;
    for (llvm::Function &f : *module)
      for (llvm::Instruction &inst : llvm::instructions(f))
        if (auto *to_int = llvm::dyn_cast<llvm::FPToSIInst>(&inst); to_int && !to_int->use_empty())
          round_trips += llvm::isa<llvm::SIToFPInst>(to_int->getOperand(0));
    CHECK(round_trips == 0);
  }
  std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
  // The requantization reaches both ends of the range (the small weights).
  for (size_t i : {0, 1, 4}) {
    int64_t lo = convs[i].y == DType::u8 ? 0 : -128, hi = lo + 255, at_lo = 0, at_hi = 0;
    for (int64_t j = 0; j < expected[i].numel(); ++j)
      at_lo += expected[i].get_i64(j) == lo, at_hi += expected[i].get_i64(j) == hi;
    INFO("conv " << i);
    CHECK(at_lo > 0);
    CHECK(at_hi > 0);
  }
  check_configs(*graph, inputs, expected, 2);
}

// The last column panel transposed (Kernel::columns: the rows are the lanes)
// where N is not a multiple of the panel (32 columns at 16 lanes): 7 x 7 =
// 49 columns (a panel and 17), 17, 4 (stride 2) and 40 columns; output
// channels 40 (a block of 32 rows and one of 16, half of it past O), 70
// (a second task of 6 rows), 7 (under one group of 16) and 100; K = 15
// (not a multiple of 4) and weight rows with offsets (the columns' sums);
// u8 and i8 activations; requantized to u8 / i8 and dequantized to f32.
TEST_CASE("integer conv: the last panel's columns with the rows as the lanes", "[codegen][qgemm][conv]") {
  // Out 0: u8 (multiplier 0.5, zero point 128), 1: i8 (1/1024, 0), 2: f32 (0.5).
  const std::vector<QConv> convs = {
      {DType::u8, 8, 7, 7, 40, 3, 3, 1, {1, 1, 1, 1}, 128, -3, 3, 0},
      {DType::i8, 5, 1, 17, 70, 1, 3, 1, {0, 1, 0, 1}, -5, 100, 140, 1},
      {DType::u8, 16, 4, 4, 7, 3, 3, 2, {1, 1, 1, 1}, 255, -128, 127, 2},
      {DType::u8, 8, 5, 8, 100, 3, 3, 1, {1, 1, 1, 1}, 3, -2, 2, 0},
  };
  QConvGraph q(convs, 0.5, 128, 1.0 / 1024, 0);
  const Graph &graph = *q.graph;
  {
    // The transposed kernel is there: its sums go to the write-back's
    // buffer by scatters.
    llvm::LLVMContext context;
    auto module = build_model_module(graph, "m", context);
    size_t scatters = 0;
    for (llvm::Function &f : *module)
      for (llvm::Instruction &inst : llvm::instructions(f))
        if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst))
          scatters += call->getIntrinsicID() == llvm::Intrinsic::masked_scatter;
    llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures();
    if (f.lookup("avx512vnni"))
      CHECK(scatters > 0);
  }
  check_configs(graph, q.inputs, Interpreter::run(graph, q.inputs));
}

// The byte im2col of strided convs in vectors (ConvEmitter.cpp:
// emit_strided_copy: 32 output bytes per wide load, the last vector masked
// on both sides): output rows of 45, 65 and 100 bytes (one, two and three
// whole vectors and a tail) and 6 (the tail alone); a stem-like 7 x 7
// stride 2 (K = 147, not a multiple of 4) in blocks of rows, 3 x 3 stride 2
// with a padding not the same on all sides, 1 x 1 stride 2 and 3 x 3
// stride 3; u8 and i8 activations with zero points != 0 (the padding),
// requantized to u8 / i8 and dequantized to f32.
TEST_CASE("integer conv: strided byte im2col in vectors", "[codegen][qgemm][conv]") {
  // Out 0: u8 (multiplier 1/256, zero point 128), 1: i8 (1/1024, -3), 2: f32 (0.5).
  const std::vector<QConv> convs = {
      {DType::u8, 3, 89, 89, 16, 7, 7, 2, {3, 3, 3, 3}, 131, -20, 20, 0},  // 45 x 45, blocks of rows
      {DType::i8, 5, 9, 131, 24, 3, 3, 2, {1, 0, 2, 1}, -7, -20, 20, 1},   // 65 wide
      {DType::u8, 5, 20, 199, 8, 1, 1, 2, {0, 0, 0, 0}, 255, -20, 20, 2},  // 100 wide, K = 5
      {DType::i8, 4, 16, 16, 9, 3, 3, 3, {1, 1, 1, 1}, 100, -20, 20, 0},   // 6 wide, stride 3
  };
  QConvGraph q(convs, 1.0 / 256, 128, 1.0 / 1024, -3);
  REQUIRE(count_model_functions(*q.graph, [](llvm::StringRef name) { return name.starts_with("m.conv_i8"); }) == 1);
  check_configs(*q.graph, q.inputs, Interpreter::run(*q.graph, q.inputs));
}

// DynamicQuantizeLinear's range: min / max of a whole f32 tensor (the CPU's
// vector kernel, KernelEmitter's emit_full_min_max) bit for bit against the
// reference: the last NaN (payloads differ), ties of +0 and -0 keeping the
// first, all +-inf, sizes around the vector blocks (1, 7, 64, 100, 1000);
// static sizes, and one symbolic size run at each of them.
namespace {
/// Four tensors of n elements: random, relu-like with zeros of both signs,
/// random with two NaNs (payloads differ), alternating +-inf.
std::vector<HostTensor> min_max_patterns(int64_t n) {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  HostTensor r = random_tensor(DType::f32, {n}, -5, 5);
  HostTensor z = random_tensor(DType::f32, {n}, 0, 5);
  for (int64_t i = n / 3; i < n; i += 5)
    z.set_f64(i, i % 2 ? 0.0 : -0.0);
  HostTensor q = random_tensor(DType::f32, {n}, -5, 5);
  if (n > 2) {
    q.data_as<float>()[n / 2] = bits(0x7fc00001u);
    q.data_as<float>()[n - 1] = bits(0xffc00002u);
  }
  HostTensor inf(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i)
    inf.data_as<float>()[i] = i % 2 ? INFINITY : -INFINITY;
  return {r, z, q, inf};
}
std::vector<Tensor> mins_and_maxes(const std::vector<Tensor> &in) {
  std::vector<Tensor> out;
  for (auto &x : in) {
    out.push_back(ops::min(x, {}));
    out.push_back(ops::max(x, {}, true));
  }
  return out;
}
} // namespace

TEST_CASE("whole-tensor min and max: last NaN, first zero, bit for bit", "[codegen][qgemm]") {
  std::vector<HostTensor> inputs;
  for (int64_t n : {1, 7, 64, 100, 1000})
    for (HostTensor &t : min_max_patterns(n))
      inputs.push_back(t);
  auto graph = trace_graph(types_of(inputs), mins_and_maxes);
  check_configs(*graph, inputs, Interpreter::run(*graph, inputs), 2);
}

TEST_CASE("whole-tensor min and max of a symbolic size: the vector kernel at every size", "[codegen][qgemm]") {
  // Kokoro's generator quantizes tensors of a run-time length: its ranges
  // took the scalar reduction (0.75 ms for 1.4M elements, 139 of them).
  auto graph = trace_graph(std::vector<TensorType>(4, TensorType(DType::f32, {Dim("n")})), mins_and_maxes);
  llvm::LLVMContext context;
  auto module = build_model_module(*graph, "m", context);
  size_t vector_loops = 0;
  for (const llvm::Function &f : *module)
    for (const llvm::BasicBlock &bb : f)
      vector_loops += bb.getName().starts_with("minmax.v.");
  CHECK(vector_loops >= 8); // min and max of each of the four
  Config config = int8_configs().front();
  JitCompiledGraph compiled(*graph, config.cpu, config.lanes, config.int8_dot);
  for (int64_t n : {1, 7, 64, 100, 1000}) {
    INFO("n " << n);
    std::vector<HostTensor> inputs = min_max_patterns(n);
    std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
    for (int threads : {1, 2})
      REQUIRE(bitwise_mismatch(compiled.run_threads(inputs, threads), expected).empty());
  }
}

TEST_CASE("a dynamic quantization: the stored scale and zero point loaded once per task", "[codegen][qgemm]") {
  // Elementwise kernels load the stored one-element values they read before
  // their loop (stored_scalars_read): bit for bit at 1 and 2 threads.
  HostTensor x = random_tensor(DType::f32, {3, 50, 40}, -3, 3);
  auto g = trace_graph(types_of({x}), [](auto &in) {
    Tensor zero = ops::full(0.0, DType::f32);
    Tensor lo = ops::minimum(ops::min(in[0], {}), zero), hi = ops::maximum(ops::max(in[0], {}), zero);
    Tensor scale = ops::div(ops::sub(hi, lo), ops::full(255.0, DType::f32));
    Tensor zp = ops::round(ops::sub(zero, ops::div(lo, scale)));
    Tensor q = ops::cast(ops::minimum(ops::maximum(ops::round(ops::div(in[0], scale)) + zp, zero),
                                      ops::full(255.0, DType::f32)),
                         DType::u8);
    return std::vector<Tensor>{q, scale};
  });
  auto want = Interpreter::run(*g, {x});
  for (const auto &got : {run_compiled(*g, {x}), run_compiled_two_threads(*g, {x})}) {
    MAXC_REQUIRE_CLOSE(got[0], want[0], 0, 0);
    MAXC_REQUIRE_CLOSE(got[1], want[1], 0, 0);
  }
}

// Requantization chains as a QDQ model's write-back runs them (docs/DESIGN.md,
// Integer convs): QLinearAdd's f64 multiply-adds, exact by construction,
// become f32 FMAs (FpRange.h: exact_fma_f32); a clamp of values that are
// never NaN drops min/max's NaN test; a cast to u8/i32 of a value proven
// within [-2^31, 2^31] is one 32-bit conversion (an i32 sum's f32 that
// rounds up to 2^31 still wraps to INT32_MIN). Bit for bit against the
// reference, and the module has no f64 and no 64-bit conversion left.
TEST_CASE("requantization chains in f32: exact FMAs, no NaN tests, 32-bit casts", "[codegen][qgemm]") {
  HostTensor a = full_range(DType::u8, {2, 3, 40}), b = full_range(DType::u8, {2, 3, 40});
  HostTensor s = random_tensor(DType::i32, {2, 3, 40}, -3e6, 3e6);
  const int32_t edges[] = {2147483647, 2147483584, 2147483520, -2147483647 - 1, -2147483583, 16777217, -16777219, 0};
  for (size_t i = 0; i < std::size(edges); ++i)
    s.set_i64(static_cast<int64_t>(i * 7), edges[i]);
  HostTensor m(DType::f32, {3, 1});
  m.set_f64(0, 0.00390625), m.set_f64(1, 0.0003017), m.set_f64(2, 1.5e-5);
  const float ra = 0.5701728f, rb = 1.6309738f, fixed = -198.97881f;
  auto graph = trace_graph(types_of({a, b, s}), [&](auto &in) {
    auto f64 = [](double v) { return ops::scalar(v, DType::f64); };
    auto clamp_u8 = [](const Tensor &t) {
      return ops::cast(ops::minimum(ops::maximum(ops::round(t), ops::scalar(0.0, DType::f32)), ops::scalar(255.0, DType::f32)),
                       DType::u8);
    };
    // c = fma(a, ra, fma(b, rb, fixed)) as the ONNX importer writes QLinearAdd.
    Tensor inner = ops::cast(ops::add(ops::mul(ops::cast(in[1], DType::f64), f64(rb)), f64(fixed)), DType::f32);
    Tensor c = ops::cast(ops::add(ops::mul(ops::cast(in[0], DType::f64), f64(ra)), ops::cast(inner, DType::f64)),
                         DType::f32);
    Tensor t = ops::cast(ops::cast(in[2], DType::f32), DType::i32); // 2^31 - 1 -> 2^31 -> INT32_MIN
    Tensor y = ops::add(ops::mul(ops::cast(t, DType::f32), Tensor::from_host(m, "m")), ops::scalar(128.0, DType::f32));
    return std::vector<Tensor>{clamp_u8(c), t, clamp_u8(y)};
  });
  std::vector<HostTensor> expected = Interpreter::run(*graph, {a, b, s});
  CHECK(expected[1].get_i64(0) == -2147483647 - 1);
  check_configs(*graph, {a, b, s}, expected, 2);
  llvm::LLVMContext context;
  auto module = build_model_module(*graph, "m", context);
  // What the emitter left unused (the f64 forms the FMAs replaced) goes.
  for (bool erased = true; erased;) {
    erased = false;
    for (llvm::Function &f : *module)
      for (llvm::Instruction &inst : llvm::make_early_inc_range(llvm::instructions(f)))
        if (inst.use_empty() && !inst.mayHaveSideEffects() && !inst.isTerminator()) {
          inst.eraseFromParent();
          erased = true;
        }
  }
  size_t f64_ops = 0, wide_casts = 0, fmas = 0;
  for (llvm::Function &f : *module)
    for (llvm::Instruction &inst : llvm::instructions(f)) {
      f64_ops += inst.getType()->getScalarType()->isDoubleTy();
      wide_casts += llvm::isa<llvm::FPToSIInst>(inst) && inst.getType()->getScalarSizeInBits() == 64;
      if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst))
        fmas += call->getIntrinsicID() == llvm::Intrinsic::fma;
    }
  CHECK(f64_ops == 0);
  CHECK(wide_casts == 0);
  CHECK(fmas == 2);
}
