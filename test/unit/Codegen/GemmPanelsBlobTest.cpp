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

constexpr int64_t K = 1100, N = 1000, NR = 16;

/// Compiles `y = op(x, @w)` for haswell with external and with embedded
/// weights, and checks that NAME.weights.bin holds exactly w's packed panels
/// (column c of panel p, row r = W[r, p*NR + c] for matmul's W [K, N], or
/// W[p*NR + c, r] for linear's W [N, K]) and the object's section the same
/// bytes.
void check_packed_weights(const std::string &op, bool linear) {
  test::TempDir dir;
  std::vector<int64_t> wshape = linear ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  HostTensor w = test::random_tensor(DType::f32, wshape, -1, 1);
  write_safetensors(dir.file("w.safetensors"), {{"mm.w", w}});
  std::string model = dir.write("pk.json", R"({
    "maxc": 1, "name": "pk", "weights": "w.safetensors",
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["n", 1100]}], "outputs": ["y"],
    "modules": {"Mm": {"args": ["x"], "params": {"w": [)" + std::to_string(wshape[0]) + ", " +
                                                     std::to_string(wshape[1]) + R"(]},
                       "body": [{"y": [")" + op + R"(", "x", "@w"]}], "return": "y"}},
    "main": [{"y": ["call", "Mm", "x", {"instance": "mm"}]}]})");
  std::vector<float> expected(static_cast<size_t>((N + NR - 1) / NR * NR * K), 0.0f);
  const float *src = w.data_as<float>();
  for (int64_t p = 0; p * NR < N; ++p)
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < NR && p * NR + c < N; ++c)
        expected[static_cast<size_t>((p * K + r) * NR + c)] =
            linear ? src[(p * NR + c) * K + r] : src[r * N + p * NR + c];
  std::string packed(reinterpret_cast<const char *>(expected.data()), expected.size() * sizeof(float));
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
  REQUIRE(ByteChunks::kGeneratedBlock % (NR * K * sizeof(float)) != 0);
  check_packed_weights("linear", true);
}
