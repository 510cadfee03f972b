// A constant GEMM weight packed at compile time (Cpu/GemmPanels.h) as the
// artifacts store it: NAME.weights.bin holds exactly the panel order (16
// columns for haswell's 8-lane kernels, zeros past N), made while the blob
// is written in blocks of ByteChunks::kGeneratedBlock (this weight spans two:
// the second block starts mid-panel), and the embedded section holds the
// same bytes.
#include "TestUtil.h"

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/Safetensors.h"
#include "maxc/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace maxc;

namespace {

constexpr int64_t N = 1000, NR = 16;

/// Compiles `y = op(x, @w)` for haswell with external and with embedded
/// weights, and checks that NAME.weights.bin holds exactly w's packed panels
/// (column c of panel p, row r = W[r, p*NR + c] for matmul's W [K, N], or
/// W[p*NR + c, r] for linear's W [N, K]) and the object's section the same
/// bytes. With `dtype` f16 or bf16 the model is that type throughout (its
/// weight widened to f32 by the precision policy, whose values are then
/// exactly 16-bit): the panels hold the weight's own 16 bits.
void check_packed_weights(const std::string &op, bool linear, DType dtype = DType::f32, int64_t K = 1100) {
  test::TempDir dir;
  std::vector<int64_t> wshape = linear ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  HostTensor w = test::random_tensor(dtype, wshape, -1, 1);
  if (dtype == DType::bf16)
    w.set_f64(0, 1048576.0); // (2^20: past f16's range, so the panels stay bf16, not f16)
  write_safetensors(dir.file("w.safetensors"), {{"mm.w", w}});
  std::string model = dir.write("pk.json", R"({
    "maxc": 1, "name": "pk", "weights": "w.safetensors",
    "inputs": [{"name": "x", "dtype": ")" + std::string(dtype_name(dtype)) + R"(", "shape": ["n", )" +
                                                     std::to_string(K) + R"(]}], "outputs": ["y"],
    "modules": {"Mm": {"args": ["x"], "params": {"w": {"dtype": ")" + std::string(dtype_name(dtype)) +
                                                     R"(", "shape": [)" + std::to_string(wshape[0]) + ", " +
                                                     std::to_string(wshape[1]) + R"(]}},
                       "body": [{"y": [")" + op + R"(", "x", "@w"]}], "return": "y"}},
    "main": [{"y": ["call", "Mm", "x", {"instance": "mm"}]}]})");
  size_t element = dtype_size(dtype);
  std::string expected(static_cast<size_t>((N + NR - 1) / NR * NR * K) * element, '\0');
  const char *src = reinterpret_cast<const char *>(w.data());
  for (int64_t p = 0; p * NR < N; ++p)
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < NR && p * NR + c < N; ++c)
        std::memcpy(&expected[static_cast<size_t>((p * K + r) * NR + c) * element],
                    src + static_cast<size_t>(linear ? (p * NR + c) * K + r : r * N + p * NR + c) * element, element);
  const std::string &packed = expected;
  REQUIRE(packed.size() > ByteChunks::kGeneratedBlock);
  std::string stored[2];
  for (bool external : {true, false}) {
    driver::CompileRequest r;
    r.model = model;
    r.options.cpu = "haswell";
    r.options.external_weights = external;
    r.output = dir.file(external ? "pk.o" : "emb.o");
    r.output_given = true;
    DiagnosticEngine diagnostics;
    driver::CompileResult result;
    REQUIRE(driver::compile(r, diagnostics, result));
    stored[external] = read_file(external ? dir.file("pk.weights.bin") : r.output);
  }
  CHECK(stored[1] == packed);                            // the blob: the packed weight only
  CHECK(stored[0].find(packed) != std::string::npos);   // the object's section
}

} // namespace

TEST_CASE("packed GEMM weights in NAME.weights.bin and the weights section", "[codegen][gemm-panels][weights]") {
  check_packed_weights("matmul", false);
}

// A linear's weight W [N, K] is pre-transposed by decompose without making
// the copy (Graph::add_transposed_constant): its panels are packed straight
// from W, in blocks that start mid-panel, to the same bytes as from Wᵀ.
TEST_CASE("packed linear weights come from the source layout", "[codegen][gemm-panels][weights]") {
  REQUIRE(ByteChunks::kGeneratedBlock % (NR * 1100 * sizeof(float)) != 0);
  check_packed_weights("linear", true);
}

// An f16 / bf16 model's weights stay 16-bit in their panels (half the
// bytes), in blocks that start mid-panel (K 2200: 4.4 MB of panels).
TEST_CASE("packed GEMM weights of f16 and bf16 models keep their 16 bits", "[codegen][gemm-panels][weights][f16]") {
  REQUIRE(ByteChunks::kGeneratedBlock % (NR * 2200 * 2) != 0);
  for (DType dtype : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dtype));
    check_packed_weights("matmul", false, dtype, 2200);
    check_packed_weights("linear", true, dtype, 2200);
  }
}
