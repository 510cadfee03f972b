// maxc compile: a model to an object file, a C header and a manifest, for
// the CPU (default) or AMD GPUs (--gpu ARCH,...). The pipeline is
// lib/Driver (maxc/Driver/Compile.h); this file maps flags to a request and
// prints what happened.
#include "Diagnose.h"

#include "maxc/Driver/Compile.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <unistd.h>

namespace maxc::cli {

int run_compile(const GlobalOptions &global, const CompileCommandOptions &options) {
  DiagnosticEngine diagnostics;
  diagnostics.set_warnings_as_errors(global.warnings_as_errors);
  if (options.weights_mode != "embed" && options.weights_mode != "external") {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--weights-mode",
                      "unknown weights mode '" + options.weights_mode + "' (expected embed or external)");
    return finish(global, diagnostics);
  }
  unsigned jobs = 0;
  if (options.jobs_given) {
    char *end = nullptr;
    errno = 0;
    unsigned long n = std::strtoul(options.jobs.c_str(), &end, 10);
    if (options.jobs.empty() || !std::isdigit(static_cast<unsigned char>(options.jobs[0])) || *end != '\0' ||
        errno != 0 || n < 1 || n > 1024) {
      diagnostics.error(ErrorCode::InvalidArgument, "", "--jobs",
                        "expected a number of threads from 1 to 1024, got '" + options.jobs + "'");
      return finish(global, diagnostics);
    }
    jobs = static_cast<unsigned>(n);
  }
  driver::CompileRequest request;
  request.model = options.model;
  request.weights = options.weights;
  request.dims = global.onnx_dims; // ONNX: --dim pins, --bind, --no-dedup
  request.bound_inputs = global.bound_inputs;
  request.max_dims = global.max_dims;
  request.state = global.state;
  request.dedup = !global.no_dedup;
  request.fuse_qdq = !global.no_qdq_fusion;
  request.quantize_weights = global.quantize_weights;
  // --gpu sm_80,...: NVIDIA (backend "cuda"); gfx names and AMD aliases: "amdgpu".
  request.backend = options.gpu.empty() ? "cpu" : options.gpu.find("sm_") != std::string::npos ? "cuda" : "amdgpu";
  request.options.triple = options.target;
  request.options.cpu = options.cpu;
  request.options.opt_level = options.opt_level;
  request.options.gpu = options.gpu;
  request.options.code_object_version = options.code_object_version;
  request.options.external_weights = options.weights_mode == "external";
  request.options.jobs = jobs;
  request.options.profile = options.profile;
  request.name = options.name;
  request.output = options.output;
  request.output_given = options.output_given;
  request.emit = options.emit;
  request.threads = options.threads;
  request.print_outputs = options.print_outputs;
  request.verify_reproducible = options.verify_reproducible;
  request.manifest_timings = options.manifest_timings;
  request.depfile = options.depfile;
  request.depfile_path = options.depfile_path;

  if (options.tensor_parallel < 1 || options.tensor_parallel > 4096 ||
      (options.tensor_parallel == 1 && options.rank != -1) ||
      (options.tensor_parallel > 1 && (options.rank < -1 || options.rank >= options.tensor_parallel))) {
    diagnostics.error(ErrorCode::InvalidArgument, "", options.tensor_parallel == 1 ? "--rank" : "--tensor-parallel",
                      "--tensor-parallel takes a rank count from 1 to 4096 and --rank a rank below it, got " +
                          std::to_string(options.tensor_parallel) + " and " + std::to_string(options.rank));
    return finish(global, diagnostics);
  }
  request.tensor_parallel = options.tensor_parallel;
  request.shard_replicated = global.shard_replicated;

  // Progress on a terminal, silence when piped or --quiet.
  bool progress = !global.quiet && ::isatty(2) != 0 && !options.print_outputs;
  driver::CompileResult result;
  auto compile_once = [&](driver::CompileRequest &r) {
    return driver::compile(r, diagnostics, result, [&](const std::string &step) {
      spdlog::debug("compile: {}", step);
      if (progress)
        std::fprintf(stderr, "\r\033[Kmaxc: %s %s%s", step.c_str(), step == "load" ? options.model.c_str() : "",
                     r.tensor_parallel > 1 ? (" (rank " + std::to_string(r.rank) + ")").c_str() : "");
    });
  };
  bool ok = true;
  if (options.tensor_parallel > 1 && options.rank < 0) {
    // Every rank's program, one compile each: OUT.o -> OUT_rankR.o, --name X -> X_rankR.
    std::vector<std::pair<std::string, std::string>> outputs;
    std::vector<std::string> objects;
    for (int r = 0; r < options.tensor_parallel && ok; ++r) {
      driver::CompileRequest each = request;
      each.rank = r;
      std::string suffix = "_rank" + std::to_string(r);
      if (!options.name.empty())
        each.name = options.name + suffix;
      if (options.output_given) {
        size_t slash = options.output.find_last_of('/'), dot = options.output.find_last_of('.');
        bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
        each.output = ext ? options.output.substr(0, dot) + suffix + options.output.substr(dot) : options.output + suffix;
      }
      result = driver::CompileResult{};
      ok = compile_once(each);
      outputs.insert(outputs.end(), result.outputs.begin(), result.outputs.end());
      objects.push_back(result.object_path);
    }
    result.outputs = outputs;
    std::string all;
    for (const std::string &o : objects)
      all += (all.empty() ? "" : ", ") + o;
    result.object_path = all;
  } else {
    request.rank = options.rank < 0 ? 0 : options.rank;
    ok = compile_once(request);
  }
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  if (!global.quiet)
    print_quantized_layers(result.quantized, global);
  if (ok && options.print_outputs) {
    for (const auto &[kind, path] : result.outputs)
      if (kind != "depfile")
        std::cout << path << "\n";
    return finish(global, diagnostics);
  }
  if (options.time_passes) {
    // Steps nest (the backend's own steps run inside "backend"): the total
    // is the sum of the top-level steps.
    static const std::set<std::string> top = {"validate", "load", "decompose", "plan", "backend",
                                              "verify-reproducible", "artifacts", "write"};
    double total = 0;
    for (const auto &[step, ms] : result.timer.passes())
      if (top.count(step))
        total += ms;
    std::fprintf(stderr, "===- maxc compile time (%s backend) -===\n", request.backend.c_str());
    for (const auto &[step, ms] : result.timer.passes())
      std::fprintf(stderr, "  %s%-*s %9.1f ms  %5.1f%%\n", top.count(step) ? "" : "  ", top.count(step) ? 24 : 22,
                   step.c_str(), ms, total > 0 ? 100 * ms / total : 0);
    std::fprintf(stderr, "  %-24s %9.1f ms\n", "total", total);
  }
  if (ok && !global.quiet && global.diagnostics == DiagnosticsFormat::text)
    std::cerr << "maxc: wrote " << result.object_path << " (" << result.summary << ")\n";
  return finish(global, diagnostics);
}

} // namespace maxc::cli
