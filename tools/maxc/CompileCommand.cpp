// maxc compile: a model to an object file, a C header and a manifest.
#include "Diagnose.h"

#include "maxc/Codegen/HarnessEmitter.h"
#include "maxc/Codegen/Manifest.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Sha256.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <set>
#include <unistd.h>

namespace maxc::cli {

namespace {

// Every --emit kind, in the order --print-outputs lists them.
const char *const kEmitKinds[] = {"obj", "header", "manifest", "asm", "llvm-ir", "graph", "test-harness",
                                  "bench-harness"};

std::string directory_of(const std::string &path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// Progress on a terminal, silence when piped or --quiet.
struct Progress {
  bool on;
  int total;
  int step = 0;
  void stage(const std::string &what) {
    if (on)
      std::fprintf(stderr, "\r\033[Kmaxc: [%d/%d] %s", ++step, total, what.c_str());
  }
  void done() {
    if (on)
      std::fprintf(stderr, "\r\033[K");
  }
};

struct Timer {
  std::vector<std::pair<std::string, double>> stages;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void lap(const std::string &name) {
    auto now = std::chrono::steady_clock::now();
    stages.emplace_back(name, std::chrono::duration<double, std::milli>(now - start).count());
    start = now;
  }
};

} // namespace

int run_compile(const GlobalOptions &global, const CompileCommandOptions &options) {
  DiagnosticEngine diagnostics;
  diagnostics.set_warnings_as_errors(global.warnings_as_errors);
  std::set<std::string> emit(options.emit.begin(), options.emit.end());
  if (emit.empty())
    emit = {"obj", "header", "manifest"};
  for (const std::string &e : emit)
    if (std::find(std::begin(kEmitKinds), std::end(kEmitKinds), e) == std::end(kEmitKinds))
      diagnostics.error(ErrorCode::InvalidArgument, "", "--emit",
                        "unknown artifact '" + e +
                            "' (expected obj, header, manifest, asm, llvm-ir, graph, test-harness, bench-harness)");
  if (options.weights_mode != "embed" && options.weights_mode != "external")
    diagnostics.error(ErrorCode::InvalidArgument, "", "--weights-mode",
                      "unknown weights mode '" + options.weights_mode + "' (expected embed or external)");
  if (options.threads != 1)
    diagnostics.error(ErrorCode::InvalidArgument, "", "--threads",
                      "threads are chosen at run time (NAME_set_parallel_for in the header); use --threads 1");
  if (options.opt_level < 0 || options.opt_level > 3)
    diagnostics.error(ErrorCode::InvalidArgument, "", "-O", "optimization level must be 0 to 3");
  if (!options.name.empty() && !is_c_identifier(options.name))
    diagnostics.error(ErrorCode::InvalidArgument, "", "--name", "'" + options.name + "' is not a C identifier");
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  // Output paths: OUT.o, and NAME.h / NAME.manifest.json / ... next to it.
  std::string object_path = options.output;
  Timer timer;
  Progress progress{!global.quiet && ::isatty(2) != 0, 4};

  progress.stage("trace " + options.model);
  spdlog::debug("compile: tracing {}", options.model);
  LoadOptions load;
  load.dims = global.onnx_dims; // ONNX: --dim pins, --no-dedup
  load.dedup = !global.no_dedup;
  load.weights_path = options.weights;
  LoadedModel model = load_model(options.model, load, diagnostics);
  timer.lap("trace");
  if (model.graph)
    spdlog::debug("compile: traced {} nodes, {} subgraph definitions, {} weights in {:.1f} ms", model.graph->nodes().size(),
                  model.graph->subgraphs().size(), model.params.size(), timer.stages.back().second);
  if (!model.graph) {
    progress.done();
    return finish(global, diagnostics);
  }
  std::string name = options.name.empty() ? model.graph->name() : options.name;
  if (object_path.empty())
    object_path = name + ".o";
  std::string stem = directory_of(object_path) + name;
  std::map<std::string, std::string> paths = {{"obj", object_path},
                                              {"header", stem + ".h"},
                                              {"manifest", stem + ".manifest.json"},
                                              {"asm", stem + ".s"},
                                              {"llvm-ir", stem + ".ll"},
                                              {"graph", stem + ".graph.json"},
                                              {"weights", stem + ".weights.bin"},
                                              {"test-harness", stem + "_test.c"},
                                              {"bench-harness", stem + "_bench.c"}};
  if (options.print_outputs) {
    progress.done();
    for (const char *e : kEmitKinds)
      if (emit.count(e))
        std::cout << paths[e] << "\n";
    if (options.weights_mode == "external")
      std::cout << paths["weights"] << "\n";
    return finish(global, diagnostics);
  }

  CompileOptions compile;
  compile.name = name;
  compile.triple = options.target;
  compile.cpu = options.cpu;
  compile.opt_level = options.opt_level;
  compile.external_weights = options.weights_mode == "external";
  EmitRequest request;
  request.object = emit.count("obj") != 0;
  request.assembly = emit.count("asm") != 0;
  request.llvm_ir = emit.count("llvm-ir") != 0;
  CompiledModel compiled;
  try {
    progress.stage("generate code (" + std::to_string(model.graph->subgraphs().size()) + " subgraph definitions)");
    compiled = compile_model(*model.graph, compile, request);
    timer.lap("codegen");
    spdlog::debug("compile: {} for {} ({}), -O{}, {:.1f} ms", compiled.target.triple, compiled.target.cpu,
                  compiled.target.features.empty() ? "cpu defaults" : "host features", compiled.target.opt_level,
                  timer.stages.back().second);
    for (const std::string &k : compiled.kernels)
      spdlog::debug("compile: {}", k);
    if (options.verify_reproducible) {
      progress.stage("compile again to verify reproducibility");
      CompiledModel again = compile_model(*model.graph, compile, request);
      timer.lap("verify-reproducible");
      if (again.object != compiled.object || again.assembly != compiled.assembly ||
          again.llvm_ir != compiled.llvm_ir || again.header != compiled.header)
        diagnostics.error(ErrorCode::Internal, options.model, "",
                          "two compiles with the same inputs produced different artifacts");
    }
  } catch (const Error &e) {
    progress.done();
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }

  progress.stage("write artifacts");
  std::map<std::string, std::string> contents;
  if (emit.count("obj"))
    contents["obj"] = compiled.object;
  if (emit.count("header"))
    contents["header"] = compiled.header;
  if (emit.count("asm"))
    contents["asm"] = compiled.assembly;
  if (emit.count("llvm-ir"))
    contents["llvm-ir"] = compiled.llvm_ir;
  if (emit.count("graph"))
    contents["graph"] = graph_to_json(*model.graph, GraphJsonOptions{false, 2});
  if (compile.external_weights)
    contents["weights"] = compiled.weights_blob;
  try {
    if (emit.count("test-harness"))
      contents["test-harness"] = emit_test_harness(compiled.interface);
    if (emit.count("bench-harness"))
      contents["bench-harness"] = emit_bench_harness(compiled.interface);
  } catch (const Error &e) {
    progress.done();
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }
  if (emit.count("manifest")) {
    ManifestInputs info;
    info.options = compile;
    info.workspace_bytes = compiled.workspace_bound;
    info.kernels = compiled.kernels;
    if (options.manifest_timings)
      info.stage_ms = timer.stages;
    for (size_t i = 0; i < model.files_read.size(); ++i) {
      std::string bytes;
      try {
        bytes = read_file(model.files_read[i]);
      } catch (const Error &) {
      }
      info.inputs.push_back({i == 0 ? "model" : "weights", base_name(model.files_read[i]), sha256_hex(bytes),
                             bytes.size()});
    }
    for (const auto &[kind, text] : contents)
      info.outputs.push_back({kind, base_name(paths[kind]), sha256_hex(text), text.size()});
    contents["manifest"] = emit_manifest(compiled, info);
  }
  if (options.depfile || !options.depfile_path.empty()) {
    // Make/Ninja depfile: every artifact depends on every file read.
    auto escape = [](const std::string &path) {
      std::string out;
      for (char c : path) {
        if (c == ' ' || c == '#' || c == '\\')
          out += '\\';
        if (c == '$')
          out += '$';
        out += c;
      }
      return out;
    };
    std::string dep = escape(object_path) + ":";
    for (const std::string &f : model.files_read)
      dep += " \\\n  " + escape(f);
    contents["depfile"] = dep + "\n";
    paths["depfile"] = options.depfile_path.empty() ? object_path + ".d" : options.depfile_path;
  }
  // Everything is in memory: a failure before this point wrote nothing.
  for (const auto &[kind, text] : contents) {
    try {
      write_file_atomically(paths[kind], text);
    } catch (const Error &e) {
      diagnostics.error(e, paths[kind], "");
    }
  }
  if (diagnostics.has_errors()) // don't leave a partial set behind
    for (const auto &[kind, text] : contents)
      ::unlink(paths[kind].c_str());
  timer.lap("write");
  progress.done();
  if (options.time_passes) {
    double total = 0;
    for (const auto &[stage, ms] : timer.stages)
      total += ms;
    std::fprintf(stderr, "===- maxc compile time -===\n");
    for (const auto &[stage, ms] : timer.stages)
      std::fprintf(stderr, "  %-20s %9.1f ms  %5.1f%%\n", stage.c_str(), ms, total > 0 ? 100 * ms / total : 0);
    std::fprintf(stderr, "  %-20s %9.1f ms\n", "total", total);
  }
  if (!global.quiet && !diagnostics.has_errors() && global.diagnostics == DiagnosticsFormat::text)
    std::cerr << "maxc: wrote " << object_path << " (" << compiled.target.triple << ", " << compiled.target.cpu
              << ")\n";
  return finish(global, diagnostics);
}

} // namespace maxc::cli
