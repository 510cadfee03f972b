// A constant read only as a Winograd conv's weight is stored once,
// transformed (Cpu/WinogradEmitter.h: plan_winograd_only,
// winograd_weights_rewrite): NAME.weights.bin holds exactly its F(2,3)
// transform (made while the blob is written, in blocks of
// ByteChunks::kGeneratedBlock: this weight's transform spans two), not the
// original values, and the embedded section holds the same bytes. A weight
// that another conv also reads (dilation 2: im2col + GEMM) keeps its original
// bytes, and its transform is appended.
#include "TestUtil.h"

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/Safetensors.h"
#include "maxc/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <array>

using namespace maxc;

namespace {

/// The F(2,3) weights of a [O, C, 3, 3] f32 weight as the kernels read them:
/// U[e][o][c] = (G g Gᵀ)[i][j], e = 4i + j, in double, stored f32.
std::string winograd_f2_bytes(const HostTensor &w) {
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  int64_t O = w.shape()[0], C = w.shape()[1];
  std::vector<float> u(static_cast<size_t>(16 * O * C));
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c) {
      double g[3][3], gg[4][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          g[i][j] = w.get_f64(((o * C + c) * 3 + i) * 3 + j);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j)
          gg[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          u[static_cast<size_t>(((i * 4 + j) * O + o) * C + c)] =
              static_cast<float>(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]);
    }
  return std::string(reinterpret_cast<const char *>(u.data()), u.size() * sizeof(float));
}

/// The weights blob (external) and the embedded object of `model`.
std::array<std::string, 2> compile_both(test::TempDir &dir, const std::string &model, const std::string &name) {
  std::array<std::string, 2> stored;
  for (bool external : {true, false}) {
    driver::CompileRequest r;
    r.model = model;
    r.options.external_weights = external;
    r.output = dir.file(name + (external ? ".o" : ".emb.o"));
    r.output_given = true;
    DiagnosticEngine diagnostics;
    driver::CompileResult result;
    REQUIRE(driver::compile(r, diagnostics, result));
    stored[external ? 0 : 1] = read_file(external ? dir.file(name + ".weights.bin") : r.output);
  }
  return stored;
}

} // namespace

TEST_CASE("Winograd-only conv weights are stored transformed, once", "[codegen][conv][winograd][weights]") {
  constexpr int64_t O = 264, C = 256;
  test::TempDir dir;
  HostTensor w = test::random_tensor(DType::f32, {O, C, 3, 3}, -1, 1);
  write_safetensors(dir.file("w.safetensors"), {{"c.w", w}});
  std::string original(reinterpret_cast<const char *>(w.data()), w.nbytes());
  std::string transformed = winograd_f2_bytes(w); // 7x7 outputs: F(2,3)
  REQUIRE(transformed.size() > ByteChunks::kGeneratedBlock);
  auto model = [&](const std::string &name, const std::string &body) {
    return dir.write(name + ".json", R"({
    "maxc": 1, "name": ")" + name + R"(", "weights": "w.safetensors",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 256, 7, 7]}], "outputs": ["y"],
    "modules": {"Conv": {"args": ["x"], "params": {"w": [264, 256, 3, 3]}, "body": [)" +
                                          body + R"(], "return": "y"}},
    "main": [{"y": ["call", "Conv", "x", {"instance": "c"}]}]})");
  };

  SECTION("read only by a Winograd conv: the transform alone") {
    auto stored = compile_both(dir, model("wo", R"({"y": ["conv2d", "x", "@w", {"padding": [1, 1]}]})"), "wo");
    CHECK(stored[0].size() == transformed.size());
    CHECK(stored[0] == transformed);
    CHECK(stored[1].find(transformed) != std::string::npos);
    CHECK(stored[1].find(original) == std::string::npos);
  }
  SECTION("also read by an im2col conv: the original and the transform") {
    auto stored = compile_both(dir, model("both", R"({"a": ["conv2d", "x", "@w", {"padding": [1, 1]}]},
        {"b": ["conv2d", "x", "@w", {"padding": [2, 2], "dilation": [2, 2]}]},
        {"y": ["add", "a", "b"]})"),
                               "both");
    CHECK(stored[0].find(original) != std::string::npos);
    CHECK(stored[0].find(transformed) != std::string::npos);
  }
}
