// The integer GEMM (Cpu/GemmEmitter.h: emit_gemm_i8): an i32 matmul of
// 8-bit values widened by casts, B a constant packed at compile time, bit
// for bit against the reference interpreter, for every signedness (u8/i8 A
// times u8/i8 B) at odd sizes: M = 1 and rows left over after the tiles, N
// not a multiple of the panel, K not a multiple of 4, a batched A; with
// zero points (0, 128, 255) folded as MatMulInteger folds them (A's row
// sums, B's shifted column sums) against the direct (a - a_zp) @ (b -
// b_zp); compiled for the host (VNNI here: vpdpbusd), AVX-VNNI's 8 lanes
// (alderlake, where the host runs it), AVX2 (haswell: vpmaddwd) and the
// portable IR (x86-64: 4 lanes); 1 and 2 threads.
#include "CompiledRunner.h"

#include "maxc/Codegen/Target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

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

/// `graph` compiled for every configuration, at 1 and 2 threads, equals
/// `expected` bit for bit.
void check_configs(const Graph &graph, const std::vector<HostTensor> &inputs, const std::vector<HostTensor> &expected) {
  for (const Config &config : int8_configs()) {
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
  for (DType adt : {DType::u8, DType::i8})
    for (DType bdt : {DType::u8, DType::i8}) {
      // One graph: a GEMM per size.
      std::vector<TensorType> types;
      std::vector<HostTensor> weights, inputs;
      for (const Size &s : sizes) {
        types.emplace_back(adt, static_shape(s.a));
        weights.push_back(full_range(bdt, {s.a.back(), s.n}));
        inputs.push_back(full_range(adt, s.a));
      }
      auto graph = trace_graph(types, [&](auto &x) {
        std::vector<Tensor> out;
        for (size_t i = 0; i < sizes.size(); ++i)
          out.push_back(ops::matmul(ops::cast(x[i], DType::i32),
                                    ops::cast(Tensor::from_host(weights[i], "w" + std::to_string(i)), DType::i32)));
        return out;
      });
      INFO(dtype_name(adt) << " x " << dtype_name(bdt));
      REQUIRE(int8_gemm_tasks(*graph) == 1);
      check_configs(*graph, inputs, Interpreter::run(*graph, inputs));
    }
}

TEST_CASE("integer GEMM with zero points 0, 128, 255 folded into row and column sums", "[codegen][qgemm]") {
  const int64_t m = 9, k = 23, n = 41;
  const std::vector<int64_t> zps = {0, 128, 255};
  auto i32 = [](const Tensor &t) { return ops::cast(t, DType::i32); };
  auto scalar = [](int64_t v) { return ops::scalar(static_cast<double>(v), DType::i32); };
  for (DType adt : {DType::u8, DType::i8}) {
    DType bdt = adt == DType::u8 ? DType::i8 : DType::u8;
    // Zero points as the dtypes hold them: 0/128/255 for u8, -128/0/127 for i8.
    auto zp_of = [](DType d, int64_t zp) { return d == DType::u8 ? zp : zp - 128; };
    std::vector<HostTensor> weights;
    for (size_t i = 0; i < zps.size(); ++i)
      weights.push_back(full_range(bdt, {k, n}));
    // MatMulInteger's composition: A @ B - b_zp * rowsum(A) - a_zp * colsum(B - b_zp).
    auto folded = trace_graph({TensorType(adt, {m, k})}, [&](auto &x) {
      std::vector<Tensor> out;
      for (size_t i = 0; i < zps.size(); ++i) {
        int64_t a_zp = zp_of(adt, zps[i]), b_zp = zp_of(bdt, zps[zps.size() - 1 - i]);
        std::string w = "w" + std::to_string(i);
        Tensor y = ops::matmul(i32(x[0]), i32(Tensor::from_host(weights[i], w)));
        y = ops::sub(y, ops::mul(ops::sum(i32(x[0]), {1}, true), scalar(b_zp)));
        y = ops::sub(y, ops::mul(scalar(a_zp), Tensor::from_host(shifted_column_sums(weights[i], b_zp), w + ".sums")));
        out.push_back(y);
      }
      return out;
    });
    auto direct = trace_graph({TensorType(adt, {m, k})}, [&](auto &x) {
      std::vector<Tensor> out;
      for (size_t i = 0; i < zps.size(); ++i) {
        int64_t a_zp = zp_of(adt, zps[i]), b_zp = zp_of(bdt, zps[zps.size() - 1 - i]);
        out.push_back(ops::matmul(ops::sub(i32(x[0]), scalar(a_zp)),
                                  ops::sub(i32(Tensor::from_host(weights[i], "w" + std::to_string(i))), scalar(b_zp))));
      }
      return out;
    });
    INFO(dtype_name(adt) << " x " << dtype_name(bdt));
    REQUIRE(int8_gemm_tasks(*folded) == 1);
    HostTensor x = full_range(adt, {m, k});
    check_configs(*folded, {x}, Interpreter::run(*direct, {x}));
  }
}
