// Loading GPU artifacts: the clang offload bundle the HIP artifact embeds
// (checked against clang-offload-bundler-19 where installed), the
// launcher's arch matching (generic targets, xnack/sramecc), and the CUDA
// artifact (PTX per sm, cubins through ptxas where installed).
#include "StateModel.h"
#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <dlfcn.h>
#include <fstream>
#include <sstream>

using namespace maxc;
using namespace maxc::test;

namespace {

std::unique_ptr<Graph> tiny_model() {
  return trace_graph({TensorType(DType::f32, {Dim("batch"), 8}), TensorType(DType::f32, {8, 4})},
                     [](const std::vector<Tensor> &in) { return std::vector<Tensor>{ops::tanh(ops::matmul(in[0], in[1]))}; });
}

driver::BackendOutput compile_with(const std::string &backend, const Graph &graph, const std::string &gpu,
                                   std::set<std::string> emit) {
  driver::BackendOptions options;
  options.gpu = gpu;
  options.cpu = "";
  if (gpu.find("generic") != std::string::npos)
    options.code_object_version = 6; // generic targets need code object v6
  PassTimer timer;
  const driver::Backend *b = driver::find_backend(backend);
  b->validate(options);
  return b->compile(driver::plan_model(graph, "tiny", {}, b->plan_options()), options, emit, timer);
}

std::string artifact_of(const driver::BackendOutput &out, const std::string &kind) {
  for (const auto &[k, bytes] : out.artifacts)
    if (k == kind)
      return bytes;
  FAIL("no artifact " << kind);
  return "";
}

bool have(const std::string &tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

std::string run_output(const std::string &command) {
  std::string out;
  if (FILE *p = ::popen(command.c_str(), "r")) {
    char buffer[256];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, p))
      out.append(buffer, n);
    ::pclose(p);
  }
  return out;
}

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("the launcher's arch matching: generic targets and target features", "[codegen][gpu][gpuload]") {
  CHECK(amdgpu_target_matches("gfx90a:sramecc+:xnack-", "gfx90a"));
  CHECK(amdgpu_target_matches("gfx90a", "gfx90a"));
  CHECK_FALSE(amdgpu_target_matches("gfx90a:sramecc+:xnack-", "gfx942"));
  CHECK_FALSE(amdgpu_target_matches("gfx9", "gfx90a"));
  CHECK_FALSE(amdgpu_target_matches("gfx90a0", "gfx90a"));
  // Features the code object fixes must agree; unset ones match either way.
  CHECK(amdgpu_target_matches("gfx90a:sramecc+:xnack-", "gfx90a:xnack-"));
  CHECK_FALSE(amdgpu_target_matches("gfx90a:sramecc+:xnack-", "gfx90a:xnack+"));
  CHECK(amdgpu_target_matches("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-"));
  CHECK_FALSE(amdgpu_target_matches("gfx942:sramecc-:xnack-", "gfx942:sramecc+"));
  CHECK_FALSE(amdgpu_target_matches("gfx942", "gfx942:sramecc+"));
  // Generic targets run on every member of their family, nothing else.
  CHECK(amdgpu_target_matches("gfx1100", "gfx11-generic"));
  CHECK(amdgpu_target_matches("gfx1101", "gfx11-generic"));
  CHECK(amdgpu_target_matches("gfx1151", "gfx11-generic"));
  CHECK_FALSE(amdgpu_target_matches("gfx1030", "gfx11-generic"));
  CHECK_FALSE(amdgpu_target_matches("gfx11-generic", "gfx1100"));
  CHECK(amdgpu_target_matches("gfx906:sramecc+:xnack-", "gfx9-generic"));
  CHECK(amdgpu_target_matches("gfx900:xnack-", "gfx9-generic:xnack-"));
  CHECK_FALSE(amdgpu_target_matches("gfx90a:sramecc+:xnack-", "gfx9-generic")); // not in gfx9-generic
  CHECK(amdgpu_target_matches("gfx1032", "gfx10-3-generic"));
  CHECK(amdgpu_target_matches("gfx1201", "gfx12-generic"));
  CHECK_THROWS_AS(amdgpu_target_requirements("gfx90a:xnack"), Error);
  CHECK(amdgpu_target_requirements("gfx11-generic").processors.size() >= 4);
}

TEST_CASE("offload bundles have clang's layout", "[codegen][gpu][gpuload]") {
  std::vector<std::pair<std::string, std::string>> objects = {{"gfx90a", "AAAA"}, {"gfx942", "BBBBBB"}};
  std::string bundle = make_offload_bundle(objects, "x86_64-unknown-linux-gnu");
  CHECK(bundle.compare(0, 24, "__CLANG_OFFLOAD_BUNDLE__") == 0);
  auto entries = read_offload_bundle(bundle);
  REQUIRE(entries.size() == 3);
  CHECK(entries[0] == std::make_pair(std::string("host-x86_64-unknown-linux-gnu-"), std::string()));
  CHECK(entries[1] == std::make_pair(std::string("hipv4-amdgcn-amd-amdhsa--gfx90a"), std::string("AAAA")));
  CHECK(entries[2] == std::make_pair(std::string("hipv4-amdgcn-amd-amdhsa--gfx942"), std::string("BBBBBB")));
  CHECK(bundle.size() == 2 * 4096 + 6); // entries at 4096 and 8192
  CHECK(bundle.substr(4096, 4) == "AAAA");
  CHECK(bundle.substr(8192, 6) == "BBBBBB");
  CHECK_THROWS_AS(read_offload_bundle("not a bundle"), Error);
  CHECK_THROWS_AS(read_offload_bundle(bundle.substr(0, 40)), Error);

  if (!have("clang-offload-bundler-19")) {
    WARN("clang-offload-bundler-19 not installed (Debian clang-tools-19): layout not checked against clang");
    return;
  }
  TempDir dir;
  std::ofstream(dir.path + "/a.o", std::ios::binary) << "AAAA";
  std::ofstream(dir.path + "/b.o", std::ios::binary) << "BBBBBB";
  std::ofstream(dir.path + "/h.o", std::ios::binary);
  std::ofstream(dir.path + "/ours.bundle", std::ios::binary) << bundle;
  // clang's own bundle of the same files is byte-identical.
  std::string make = "clang-offload-bundler-19 --type=o --bundle-align=4096 "
                     "--targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942 "
                     "--input=" + dir.path + "/h.o --input=" + dir.path + "/a.o --input=" + dir.path +
                     "/b.o --output=" + dir.path + "/clang.bundle";
  REQUIRE(std::system(make.c_str()) == 0);
  CHECK(read_file(dir.path + "/clang.bundle") == bundle);
  std::string listed = run_output("clang-offload-bundler-19 --list --type=o --input=" + dir.path + "/ours.bundle");
  CHECK(listed.find("hipv4-amdgcn-amd-amdhsa--gfx90a\n") != std::string::npos);
  CHECK(listed.find("hipv4-amdgcn-amd-amdhsa--gfx942\n") != std::string::npos);
  std::string unbundle = "clang-offload-bundler-19 --unbundle --type=o --targets=hipv4-amdgcn-amd-amdhsa--gfx942 --input=" +
                         dir.path + "/ours.bundle --output=" + dir.path + "/out.o";
  REQUIRE(std::system(unbundle.c_str()) == 0);
  CHECK(read_file(dir.path + "/out.o") == "BBBBBB");
}

TEST_CASE("the HIP artifact embeds its code objects as one offload bundle", "[codegen][gpu][gpuload]") {
  auto graph = tiny_model();
  driver::BackendOutput out = compile_with("amdgpu", *graph, "gfx90a,gfx11-generic", {"obj", "hsaco"});
  std::string object = artifact_of(out, "obj");
  size_t at = object.find("__CLANG_OFFLOAD_BUNDLE__");
  REQUIRE(at != std::string::npos);
  std::string tail = object.substr(at);
  auto entries = read_offload_bundle(tail); // bounds-checked against the object's tail
  REQUIRE(entries.size() == 3);
  CHECK(entries[1].first == "hipv4-amdgcn-amd-amdhsa--gfx90a");
  CHECK(entries[1].second == artifact_of(out, "hsaco.gfx90a"));
  CHECK(entries[2].first == "hipv4-amdgcn-amd-amdhsa--gfx11-generic");
  CHECK(entries[2].second == artifact_of(out, "hsaco.gfx11-generic"));
  // The launcher calls the old-layout properties entry point by name and
  // falls back to strcspn/strncmp arch matching.
  CHECK(object.find("hipGetDeviceProperties") != std::string::npos);
  CHECK(object.find("hipGetDevicePropertiesR0600") == std::string::npos);
  CHECK(object.find("hipModuleLoadData") != std::string::npos);
  if (have("clang-offload-bundler-19")) {
    TempDir dir;
    std::ofstream(dir.path + "/tiny.bundle", std::ios::binary) << tail; // the object's bytes after the bundle are ignored
    std::string listed = run_output("clang-offload-bundler-19 --list --type=o --input=" + dir.path + "/tiny.bundle 2>&1");
    CHECK(listed.find("hipv4-amdgcn-amd-amdhsa--gfx11-generic") != std::string::npos);
  }
}

TEST_CASE("the CUDA artifact: PTX per sm, the HIP artifact's API on the driver API", "[codegen][gpu][gpuload]") {
  auto graph = tiny_model();
  CHECK(driver::find_backend("cuda") != nullptr);
  std::vector<std::string> sms = resolve_cuda_arches("sm_80, sm_90,sm_80");
  CHECK(sms == std::vector<std::string>{"sm_80", "sm_90"});
  CHECK_THROWS_AS(resolve_cuda_arches("sm_80,gfx90a"), Error);
  CHECK_THROWS_AS(resolve_cuda_arches("sm_80,"), Error);
  driver::BackendOutput out = compile_with("cuda", *graph, "sm_80,sm_90", {"obj", "header", "ptx", "cubin"});
  for (const std::string &sm : sms) {
    std::string ptx = artifact_of(out, "ptx." + sm);
    CHECK(ptx.find(".target " + sm) != std::string::npos);
    CHECK(ptx.find(".entry tiny_main_k") != std::string::npos);
  }
  std::string header = artifact_of(out, "header");
  CHECK(header.find("for NVIDIA GPUs (sm_80, sm_90)") != std::string::npos);
  CHECK(header.find("-lcuda") != std::string::npos);
  CHECK(header.find("int32_t tiny_init(tiny_context **ctx);") != std::string::npos);
  CHECK(header.find("int32_t tiny_cuda_error(const tiny_context *ctx);") != std::string::npos);
  CHECK(header.find("#define TINY_ERROR_NO_MATCHING_ARCH 7") != std::string::npos);
  CHECK(out.manifest.link == std::vector<std::string>{"-lcuda"});
  CHECK(out.manifest.backend == "cuda");
  CHECK(out.manifest.extra_json.find("\"symbol\":\"tiny_main_k") != std::string::npos);
  std::string object = artifact_of(out, "obj");
  for (const char *symbol : {"cuModuleLoadData", "cuLaunchKernel", "cuMemAlloc_v2", "cuMemFree_v2", "cuStreamSynchronize",
                             "cuDevicePrimaryCtxRetain", "tiny_cuda_error", "tiny_run_packed"}) {
    INFO(symbol);
    CHECK(object.find(symbol) != std::string::npos);
  }
  CHECK(object.find("hipModuleLoadData") == std::string::npos);
  CHECK(object.find(".target sm_90") != std::string::npos); // the PTX itself is embedded
  std::string ptxas = find_ptxas();
  if (ptxas.empty()) {
    WARN("ptxas not installed: cubins not checked");
  } else {
    // ptxas accepted the PTX of both sms: a cubin (ELF) for each, embedded too.
    for (const std::string &sm : sms) {
      std::string cubin = artifact_of(out, "cubin." + sm);
      CHECK(cubin.substr(0, 4) == "\x7f" "ELF");
      CHECK(object.find(cubin.substr(0, 256)) != std::string::npos);
    }
    CHECK(out.manifest.extra_json.find("\"cubin_sha256\"") != std::string::npos);
  }
  // Same inputs, same bytes.
  CHECK(compile_with("cuda", *graph, "sm_80,sm_90", {"obj", "header", "ptx", "cubin"}).artifacts == out.artifacts);
  // Options that are AMD's only are refused.
  driver::BackendOptions options;
  options.gpu = "sm_80";
  options.code_object_version = 5;
  CHECK_THROWS_WITH(driver::find_backend("cuda")->validate(options), Catch::Contains("AMD GPUs only"));
}

TEST_CASE("maxc run --device cuda without a CUDA driver is a clear E0302", "[codegen][gpu][gpuload]") {
  if (void *driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(driver);
    WARN("a CUDA driver is installed: the run itself is scripts/gpu-check's business");
    return;
  }
  auto graph = tiny_model();
  std::vector<HostTensor> inputs = {HostTensor(DType::f32, {2, 8}), HostTensor(DType::f32, {8, 4})};
  try {
    driver::run_on_host("cuda", *graph, inputs, {});
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::NoGpuDevice);
    CHECK_THAT(e.what(), Catch::Contains("no CUDA driver"));
  }
}

// The generated host code against stub runtimes (a C library with the
// HIP / CUDA driver entry points the object calls, printing what it is
// asked): the loading order and fallbacks, launches and cleanup, with no
// GPU and no vendor runtime installed. Needs a C compiler (cc).
namespace {

const char *kCudaStub = R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuCtxGetDevice(int *d) { return 201; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)0x1000; printf("retain %d\n", d); return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { printf("release %d\n", d); return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuModuleLoadData(void **m, const void *image) {
  const char *p = image, *accept = getenv("STUB_ACCEPT");
  char target[16] = "";
  if (memcmp(p, "\x7f" "ELF", 4) == 0) {
    unsigned flags; memcpy(&flags, p + 48, 4); printf("load cubin %u\n", (flags >> 8) & 0xff); /* EF_CUDA_SM */
  } else {
    const char *t = strstr(p, ".target "); if (t) sscanf(t + 8, "%15s", target); printf("load ptx %s\n", target);
  }
  if (accept && strcmp(accept, target) == 0) { *m = (void *)0x2000; return 0; }
  return 209;
}
int cuModuleGetFunction(void **f, void *m, const char *name) { *f = (void *)name; return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)malloc(n); return 0; }
int cuMemFree_v2(unsigned long long p) { free((void *)p); return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh,
                   void *st, void **params, void **extra) { printf("launch %s %u %u\n", (const char *)f, gx, bx); return 0; }
int cuModuleUnload(void *m) { printf("unload\n"); return 0; }
int cuStreamSynchronize(void *s) { return 0; }
)";

const char *kHipStub = R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int hipGetDeviceCount(int *n) { *n = 1; return 0; }
int hipGetDevice(int *d) { *d = 0; return 0; }
int hipGetDeviceProperties(void *p, int d) { strcpy((char *)p + 396, getenv("STUB_ARCH")); return 0; }
int hipModuleLoadData(void **m, const void *image) {
  const char *p = image;
  if (memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) { printf("load bundle\n"); return 200; }
  unsigned flags; memcpy(&flags, p + 48, 4); printf("load mach 0x%x\n", flags & 0xff);
  if (getenv("STUB_MACH") && strtoul(getenv("STUB_MACH"), 0, 16) == (flags & 0xff)) { *m = (void *)0x2000; return 0; }
  return 200;
}
int hipModuleGetFunction(void **f, void *m, const char *name) { *f = (void *)name; return 0; }
int hipMalloc(void **p, size_t n) { *p = malloc(n); return 0; }
int hipFree(void *p) { free(p); return 0; }
int hipMemcpyHtoD(void *d, const void *s, size_t n) { memcpy(d, s, n); return 0; }
int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned sh, void *st, void **params, void **extra) { printf("launch %s %u %u\n", (const char *)f, gx, bx); return 0; }
int hipModuleUnload(void *m) { printf("unload\n"); return 0; }
int hipStreamSynchronize(void *s) { return 0; }
)";

const char *kApp = R"(#include <stdio.h>
#include "tiny.h"
int main(void) {
  tiny_context *ctx = 0;
  int rc = tiny_init(&ctx);
  printf("init %d\n", rc);
  if (rc) return 0;
  float x[16] = {0}, w[32] = {0}, y[8];
  printf("run %d\n", tiny_run(ctx, x, w, y, 2, 0, 0));
  tiny_destroy(ctx);
  return 0;
}
)";

/// Builds the artifact `out` against a stub runtime `lib` (libNAME.so from
/// `stub`); returns the app's path.
std::string build_against_stub(const TempDir &dir, const driver::BackendOutput &out, const std::string &lib,
                               const char *stub) {
  std::ofstream(dir.path + "/tiny.o", std::ios::binary) << artifact_of(out, "obj");
  std::ofstream(dir.path + "/tiny.h") << artifact_of(out, "header");
  std::ofstream(dir.path + "/stub.c") << stub;
  std::ofstream(dir.path + "/app.c") << kApp;
  std::string d = dir.path;
  REQUIRE(std::system(("cc -shared -fPIC -o " + d + "/lib" + lib + ".so " + d + "/stub.c").c_str()) == 0);
  REQUIRE(std::system(("cc -I" + d + " -o " + d + "/app " + d + "/app.c " + d + "/tiny.o -L" + d + " -l" + lib +
                       " -Wl,-rpath," + d).c_str()) == 0);
  return d + "/app";
}

} // namespace

TEST_CASE("the CUDA artifact's loading order and launches, against a stub driver", "[codegen][gpu][gpuload]") {
  if (!have("cc"))
    return;
  auto graph = tiny_model();
  driver::BackendOutput out = compile_with("cuda", *graph, "sm_80,sm_90", {"obj", "header", "cubin"});
  bool cubins = !artifact_of(out, "cubin.sm_80").empty();
  TempDir dir;
  std::string app = build_against_stub(dir, out, "cuda", kCudaStub);
  // Nothing loads: cubins, then PTX newest first; NO_MATCHING_ARCH.
  std::string none = run_output(app);
  std::string expected = std::string(cubins ? "load cubin 80\nload cubin 90\n" : "") +
                         "load ptx sm_90\nload ptx sm_80\nrelease 0\ninit 7\n";
  CHECK(none == "retain 0\n" + expected);
  // The sm_80 PTX loads: kernels launched by their PTX names, then cleanup.
  std::string ok = run_output("STUB_ACCEPT=sm_80 " + app);
  CHECK_THAT(ok, Catch::Contains("load ptx sm_80\ninit 0\nlaunch tiny_main_k0 "));
  CHECK_THAT(ok, Catch::EndsWith("run 0\nunload\nrelease 0\n"));
}

TEST_CASE("the HIP artifact's loading fallbacks, against a stub runtime", "[codegen][gpu][gpuload]") {
  if (!have("cc"))
    return;
  auto graph = tiny_model();
  // ELF e_flags machs: gfx90a 0x3f, gfx11-generic 0x54.
  driver::BackendOutput out = compile_with("amdgpu", *graph, "gfx90a,gfx11-generic", {"obj", "header"});
  TempDir dir;
  std::string app = build_against_stub(dir, out, "amdhip64", kHipStub);
  // The runtime refuses the bundle: the generic object matching gfx1101 is next.
  std::string generic = run_output("STUB_ARCH=gfx1101:xnack- STUB_MACH=54 " + app);
  CHECK_THAT(generic, Catch::StartsWith("load bundle\nload mach 0x54\ninit 0\nlaunch tiny.main.k0 "));
  CHECK_THAT(generic, Catch::EndsWith("run 0\nunload\n"));
  // An unreadable arch: every object in turn.
  CHECK_THAT(run_output("STUB_ARCH=garbage STUB_MACH=54 " + app),
             Catch::StartsWith("load bundle\nload mach 0x3f\nload mach 0x54\ninit 0\n"));
  // No object for the device: NO_MATCHING_ARCH; one that matches but fails: GPU_ERROR.
  CHECK(run_output("STUB_ARCH=gfx942:sramecc+:xnack- " + app) ==
        "load bundle\nload mach 0x3f\nload mach 0x54\ninit 7\n");
  CHECK(run_output("STUB_ARCH=gfx90a:sramecc+:xnack- " + app) ==
        "load bundle\nload mach 0x3f\nload mach 0x3f\nload mach 0x54\ninit 8\n");
}

// The state API of the GPU artifacts (NAME_state_create / NAME_step;
// docs/ONNX.md "Model state"), against the stub runtimes with device memory
// counted: each state loads a context, its buffers are device memory zeroed
// by the runtime's memset, a step launches the model's kernels (the append
// among them) and advances the length, a full state runs nothing, destroy
// frees everything it allocated.
namespace {

const char *kHipStateStub = R"(
int hipMemset(void *p, int v, size_t n) { memset(p, v, n); printf("memset %zu\n", n); return 0; }
static int live;
int hipMalloc(void **p, size_t n) { *p = malloc(n); ++live; return 0; }
int hipFree(void *p) { if (p) --live; free(p); return 0; }
int stub_live(void) { return live; }
)";

const char *kCudaStateStub = R"(
int cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n) { memset((void *)p, v, n); printf("memset %zu\n", n); return 0; }
static int live;
int cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)malloc(n); ++live; return 0; }
int cuMemFree_v2(unsigned long long p) { if (p) --live; free((void *)p); return 0; }
int stub_live(void) { return live; }
)";

const char *kStateApp = R"(#include <stdio.h>
#include "cache.h"
int stub_live(void);
int main(void) {
  if (cache_state_create(0) || cache_state_length(0) != -1) return 1;
  cache_state *a = cache_state_create(8), *b = cache_state_create(8);
  if (!a || !b) { printf("create failed\n"); return 0; }
  float x[3 * 3] = {0}, y[3 * 3];
  printf("step %d\n", cache_step(a, x, y, 3));
  printf("step %d\n", cache_step(a, x, y, 2));
  printf("length %lld %lld capacity %lld\n", (long long)cache_state_length(a), (long long)cache_state_length(b),
         (long long)cache_state_capacity(a));
  printf("full %d length %lld\n", cache_step(a, x, y, 4), (long long)cache_state_length(a));
  cache_state_reset(a);
  printf("reset %lld\n", (long long)cache_state_length(a));
  cache_state_destroy(a);
  cache_state_destroy(b);
  cache_state_destroy(0);
  printf("live %d\n", stub_live());
  return 0;
}
)";

/// `stub` with the functions named in `replaced` renamed out of the way.
std::string without(std::string stub, std::initializer_list<const char *> replaced) {
  for (const char *name : replaced)
    stub.replace(stub.find(name), 4, "static int unused_");
  return stub;
}

} // namespace

TEST_CASE("the GPU artifacts' state API, against stub runtimes", "[codegen][gpu][gpuload][state]") {
  if (!have("cc"))
    return;
  DiagnosticEngine diags;
  LoadedModel m = load_model_text(kJsonStateModel, "cache.json", LoadOptions{}, diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  struct Runtime {
    const char *backend, *gpu, *lib, *env, *load, *kernel;
    std::string stub;
  };
  for (const Runtime &rt : {Runtime{"amdgpu", "gfx90a", "amdhip64", "STUB_ARCH=gfx90a STUB_MACH=3f ",
                                    "load bundle\n", "cache.main.k",
                                    without(kHipStub, {"int hipMalloc", "int hipFree"}) + kHipStateStub},
                            Runtime{"cuda", "sm_80", "cuda", "STUB_ACCEPT=sm_80 ", "retain 0\n", "cache_main_k",
                                    without(kCudaStub, {"int cuMemAlloc_v2", "int cuMemFree_v2"}) + kCudaStateStub}}) {
    INFO(rt.backend);
    driver::BackendOptions options;
    options.gpu = rt.gpu;
    options.cpu = "";
    PassTimer timer;
    const driver::Backend *backend = driver::find_backend(rt.backend);
    driver::BackendOutput out = backend->compile(driver::plan_model(*m.graph, "cache", {}, backend->plan_options()),
                                                 options, {"obj", "header"}, timer);
    std::string header = artifact_of(out, "header");
    CHECK_THAT(header, Catch::Contains("cache_state *cache_state_create(int64_t max_context);"));
    CHECK_THAT(header, Catch::Contains("int32_t cache_step(cache_state *state, const float *x, float *out, int64_t seq);"));
    CHECK_THAT(header, Catch::Contains("#define CACHE_ERROR_STATE_FULL 10"));
    CHECK_THAT(header, Catch::Contains(", float *k, float *out,")); // NAME_run writes the buffer
    TempDir dir;
    std::string d = dir.path;
    std::ofstream(d + "/cache.o", std::ios::binary) << artifact_of(out, "obj");
    std::ofstream(d + "/cache.h") << header;
    std::ofstream(d + "/stub.c") << rt.stub;
    std::ofstream(d + "/app.c") << kStateApp;
    REQUIRE(std::system(("cc -shared -fPIC -Wno-unused-function -o " + d + "/lib" + rt.lib + ".so " + d + "/stub.c").c_str()) == 0);
    REQUIRE(std::system(("cc -Wall -Werror -I" + d + " -o " + d + "/app " + d + "/app.c " + d + "/cache.o -L" + d +
                         " -l" + rt.lib + " -Wl,-rpath," + d).c_str()) == 0);
    std::string log = run_output(rt.env + d + "/app");
    INFO(log);
    // Two states: a context each (the code loaded twice), a zeroed buffer of
    // 8 rows of 12 bytes each (96, plus 64, rounded up to 64).
    auto count = [&](const std::string &text) {
      size_t n = 0;
      for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1))
        ++n;
      return n;
    };
    CHECK(count(rt.load) == 2);
    CHECK(count("memset 192\n") == 2);
    // A step: 2 * x (k0), its rows appended (k1, 9 elements: one workgroup),
    // the sum over every filled row (k2, a workgroup per column), the add.
    std::string k = std::string("launch ") + rt.kernel;
    std::string step = k + "0 1 256\n" + k + "1 1 256\n" + k + "2 3 256\n" + k + "3 1 256\nstep 0\n";
    CHECK_THAT(log, Catch::Contains(step + step + "length 5 0 capacity 8\n"));
    // A full state runs nothing and keeps its length; reset empties it.
    CHECK_THAT(log, Catch::Contains("capacity 8\nfull 10 length 5\nreset 0\n"));
    CHECK_THAT(log, Catch::Contains("unload\n"));
    CHECK_THAT(log, Catch::EndsWith("live 0\n"));
  }
}
