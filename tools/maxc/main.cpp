// The maxc command line. Parsing lives here (CLI11 is expensive to compile,
// so no other file includes it); each subcommand is a function in its own
// file, see Commands.h.
#include "Commands.h"

#include "maxc/Support/Error.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

using namespace maxc::cli;

static const char *kFooter = R"(Examples:
  maxc check examples/mlp/model.json
  maxc compile examples/mlp/model.json -o build/mlp.o     # + mlp.h, mlp.manifest.json
  maxc compile model.json -O3 --cpu znver4 --emit obj,header,manifest,asm
  maxc compile model.json -O3 --cpu native     # this machine's CPU (AVX-512 where it has it); default: portable
  maxc compile model.json -O3 --cpu portable,native   # both: runs anywhere with AVX2, at full speed here
  maxc compile examples/mlp/model.json -o mlp.o --emit obj,header,test-harness,bench-harness
  maxc compile examples/mlp/model.json -o mlp_gpu.o --gpu gfx90a,gfx942,gfx1100   # + mlp.h (HIP; -lamdhip64)
  maxc compile examples/gpt/model.json -o gpt.o -j 4         # code generation on 4 threads (default: all)
  maxc run examples/mlp/model.json --input x=x.npy --device amdgpu-emu             # GPU kernels, emulated on the CPU
  maxc inspect mlp.o                                       # or mlp.h, mlp.manifest.json; --json
  maxc diff old/mlp.manifest.json mlp.manifest.json        # exit 3: the interface changed
  maxc targets                                             # CPUs, triples and GPUs (--json)
  maxc --diagnostics sarif check model.json > maxc.sarif   # for CI code scanning
  maxc trace examples/gpt/model.json --stats
  maxc trace examples/gpt/model.json --emit dot -o gpt.dot
  maxc trace model.onnx --canonicalize --stats      what the canonicalize step rewrote
  maxc trace examples/gpt/model.json --tensor-parallel 2 --emit sharding   # how 2 ranks split it
  maxc compile examples/gpt/model.json --tensor-parallel 2 -o gpt.o       # gpt_rank0.o, gpt_rank1.o
  maxc run examples/mlp/model.json --input x=x.npy --output-dir out/
  maxc run examples/llama/model.json --prompt 1,2,3 --generate 16 --device cpu   # greedy tokens, KV cache as state
  maxc profile examples/mlp/model.json --dim batch=8         # time per kernel, with its model nodes
  maxc init-weights examples/mlp/model.json -o mlp.safetensors --seed 1

Exit codes:
  0  success
  1  a problem with the input: model, weights, data files or command line
  2  an internal error in maxc (please report it)
  3  maxc diff only: the two manifests' interfaces differ

Diagnostics read "FILE: JSON-POINTER: error[CODE]: message"; codes are
listed in docs/diagnostics.md.)";

int main(int argc, char **argv) {
  CLI::App app{"maxc: an ahead-of-time compiler for ML models", "maxc"};
  app.footer(kFooter);
  app.fallthrough();
  app.require_subcommand(0, 1);

  GlobalOptions global;
  bool version = false, version_json = false;
  int verbosity = 0;
  std::string log_level, diagnostics = "text";
  app.add_flag("--version", version, "Print the maxc and LLVM versions and the built targets");
  app.add_flag("--json", version_json, "With --version, ops, targets, inspect or diff: print JSON");
  app.add_flag("-q,--quiet", global.quiet, "Print errors only");
  app.add_flag("-v,--verbose", verbosity, "More logging (repeat for more)");
  app.add_option("--log-level", log_level, "Logging level: trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--diagnostics", diagnostics,
                 "Diagnostics format: text (stderr), json or sarif (SARIF 2.1.0, for CI code scanning; stdout)")
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  app.add_flag("-W,--warnings-as-errors", global.warnings_as_errors, "Treat warnings as errors");
  std::vector<std::string> onnx_dims;
  // One value per occurrence (allow_extra_args false), so a global option
  // written after the subcommand does not swallow its positional model.
  app.add_option("--dim", onnx_dims,
                 "The value of a symbolic dim, NAME=N, for every command: an input dim (JSON dims, ONNX dim_param) "
                 "is pinned at import, so the model is specialized to it (run and profile run what compile would "
                 "build); run and profile also take a dim no input determines. Repeatable; an unknown NAME is an "
                 "error")
      ->allow_extra_args(false);
  std::vector<std::string> max_dims;
  app.add_option("--max-dim", max_dims,
                 "ONNX models: the largest value of a dim read at run time from a tensor (a Reshape's shape, "
                 "Slice's starts, TopK's k given as inputs), NAME=N: the dim's symbol or the tensor's name "
                 "(repeatable). Buffers are sized by it; a larger value fails the run")
      ->type_name("NAME=N")
      ->allow_extra_args(false);
  std::vector<std::string> binds;
  app.add_option("--bind", binds,
                 "Fix an ONNX graph input at compile time, NAME=VALUES (comma-separated numbers for its static "
                 "shape, or a .npy file; repeatable): it becomes a constant, so an If on it resolves and shapes "
                 "computed from it fold")
      ->type_name("NAME=VALUES")
      ->allow_extra_args(false);
  app.add_option("--state", global.state,
                 "ONNX models: make KV-cache inputs model state, updated in place (docs/ONNX.md): 'auto' finds "
                 "every output that is Concat(graph input, new rows), or IN=OUT pairs (comma-separated, '*' "
                 "matching the same text on both sides: 'past_key_values.*=present.*')")
      ->type_name("auto|IN=OUT,...");
  app.add_option("--quantize-weights", global.quantize_weights,
                 "int8 or int4: weight-only quantization of every matmul/linear with a constant f32 weight "
                 "(K >= 32): blocks of 32 along K, a scale and a zero point each (asymmetric, the range chosen per block for "
                 "the least squared error), the weight kept "
                 "in 8 or 4 bits (matmul_nbits), repeated layers' weights (arguments of one shared body) included; "
                 "the per-layer relative error goes to stderr (not with --quiet)");
  std::vector<std::string> shards;
  app.add_option("--shard", shards,
                 "With --tensor-parallel: PATTERN=replicated keeps the weights whose names match the shell pattern "
                 "whole on every rank (repeatable; column or row splits follow from the graph; "
                 "docs/tensor-parallel.md)")
      ->type_name("PATTERN=replicated")
      ->allow_extra_args(false);
  app.add_flag("--no-dedup", global.no_dedup, "ONNX models: do not trace repeated layers as shared subgraphs");
  app.add_flag("--no-qdq-fusion", global.no_qdq_fusion,
               "ONNX QDQ models: keep DequantizeLinear -> op -> QuantizeLinear as the float composition "
               "(default: the integer ops ONNX Runtime runs them as)");

  CheckOptions check;
  auto *check_cmd = app.add_subcommand("check", "Validate a model and its weights; report every problem");
  check_cmd->add_option("model", check.model, "Model file (.json or .onnx, told apart by content)")->required();
  check_cmd->add_option("--weights", check.weights, "Weights file (.safetensors); overrides the model's");
  check_cmd->add_flag("--no-weights", check.no_weights, "Check against declared param shapes, without weights");

  TraceOptions trace;
  auto *trace_cmd = app.add_subcommand("trace", "Trace a model and print its graph");
  trace_cmd->add_option("model", trace.model, "Model file (.json or .onnx, told apart by content)")->required();
  trace_cmd->add_option("--weights", trace.weights, "Weights file (.safetensors); overrides the model's");
  trace_cmd->add_flag("--no-weights", trace.no_weights, "Trace with zero tensors of the declared param shapes");
  trace_cmd->add_option("--emit", trace.emit,
                        "Output form: text, json, dot (Graphviz) or sharding (with --tensor-parallel: the split "
                        "of every weight, the collectives)")
      ->check(CLI::IsMember({"text", "json", "dot", "sharding"}));
  trace_cmd->add_flag("--stats", trace.stats, "Print key=value statistics (alone, unless --emit is given)");
  trace_cmd->add_flag("--embed-constants", trace.embed_constants, "With --emit json: embed constant data (base64)");
  trace_cmd->add_flag("--canonicalize", trace.canonicalize,
                      "The graph after the compile step 'canonicalize' (with --stats: rewrites per pattern)");
  trace_cmd->add_option("-o,--output", trace.output, "Output file (default: stdout)");
  trace_cmd->add_option("--tensor-parallel", trace.tensor_parallel,
                        "Split the model across N ranks (docs/tensor-parallel.md) and print rank --rank's program");
  trace_cmd->add_option("--rank", trace.rank, "With --tensor-parallel: the rank whose program is printed (default 0)");

  RunOptions run;
  auto *run_cmd = app.add_subcommand("run", "Run a model: reference interpreter or compiled for this CPU");
  run_cmd->add_option("model", run.model, "Model file (.json or .onnx, told apart by content)")->required();
  run_cmd->add_option("--weights", run.weights, "Weights file (.safetensors); overrides the model's");
  run_cmd->add_option("-i,--input", run.inputs, "Input data: NAME=FILE.npy (repeatable)");
  run_cmd->add_option("--output-dir", run.output_dir, "Directory for the outputs, one NAME.npy each (default: .)");
  run_cmd->add_option("--max-memory", run.max_memory,
                      "Memory budget for the run's tensors, checked before allocating: bytes or 512M, 8G "
                      "(default: the machine's physical memory)");
  run_cmd->add_option("--threads", run.threads,
                      "With --device cpu: threads of the compiled model's pool (NAME_set_num_threads; default 1)");
  run_cmd->add_option("--generate", run.generate,
                      "Generate N tokens greedily after the prompt: a prefill step, then a step per token through "
                      "the model's state (KV cache), printing the tokens");
  run_cmd->add_option("--prompt", run.prompt, "With --generate: the prompt's tokens, comma-separated (else --input)");
  run_cmd->add_option("--max-context", run.max_context,
                      "With --generate: rows of the model's state (default: prompt + N)");
  run_cmd->add_option("--tensor-parallel", run.tensor_parallel,
                      "Split the model across N ranks and run them on N threads with their collectives "
                      "(--device reference or cpu; docs/tensor-parallel.md); outputs as the whole model's");
  run_cmd->add_option("--device", run.device, "Where to run: reference (the interpreter, default), cpu (compiled, JIT), amdgpu-emu (the GPU kernels, emulated on the CPU) or cuda (an NVIDIA GPU through libcuda.so.1)");

  ProfileOptions profile;
  auto *profile_cmd = app.add_subcommand(
      "profile", "Compile a model for this CPU with per-kernel counters, run it and print where the time goes");
  profile_cmd->add_option("model", profile.model, "Model file (.json or .onnx, told apart by content)")->required();
  profile_cmd->add_option("--weights", profile.weights, "Weights file (.safetensors); overrides the model's");
  profile_cmd->add_option("-i,--input", profile.inputs,
                          "Input data: NAME=FILE.npy (repeatable; other inputs are random: floats in [-1, 1), "
                          "integers 0)");
  profile_cmd->add_option("--threads", profile.threads, "Threads of the model's pool (NAME_set_num_threads; default 1)");
  profile_cmd->add_option("--runs", profile.runs, "Timed runs (default 10)");
  profile_cmd->add_option("--warmup", profile.warmup, "Runs before the counters are reset (default 2)");
  profile_cmd->add_option("--top", profile.top, "Kernels shown, most time first (default 20 in the table, all in JSON; 0: all)");
  profile_cmd->add_flag("--json", profile.json, "Print JSON (docs/profiling.md)");
  profile_cmd->footer(R"(Examples:
  maxc profile examples/mlp/model.json --dim batch=8
  maxc profile model.onnx --threads 4 --runs 20 --top 10
  maxc profile det.onnx --dim height=640 --dim width=640  # the same as: maxc --dim ... profile det.onnx
  maxc profile model.onnx --input x=x.npy --json > profile.json
Each row is one kernel of the compiled code: its time per run and share of
all kernels' time, calls per run (a repeated block's kernels: once per call),
the most threads one of its jobs ran on, and the model nodes it computes.)");

  InitWeightsOptions init;
  auto *init_cmd = app.add_subcommand("init-weights", "Write deterministic random weights for a model");
  init_cmd->add_option("model", init.model, "Model file (.json)")->required();
  init_cmd->add_option("-o,--output", init.output, "Output .safetensors file")->required();
  init_cmd->add_option("--seed", init.seed, "Random seed (default 0)");

  CompileCommandOptions compile;
  auto *compile_cmd = app.add_subcommand("compile", "Compile a model to an object file, a C header and a manifest");
  compile_cmd->add_option("model", compile.model, "Model file (.json or .onnx, told apart by content)")->required();
  compile_cmd->add_option("--weights", compile.weights, "Weights file (.safetensors); overrides the model's");
  compile_cmd->add_option("-o,--output", compile.output, "Object file to write (default: NAME.o); other artifacts go next to it");
  compile_cmd->add_option("--name", compile.name, "C symbol prefix (default: the model's name)");
  compile_cmd->add_option("--target", compile.target, "Target triple: x86_64-linux-gnu (default), aarch64-linux-gnu");
  compile_cmd->add_option("--cpu", compile.cpu, "Target CPU: portable (default: x86-64-v3, i.e. AVX2, on x86-64; generic on aarch64), native (this machine's), znver4, skylake-avx512, ...; a list (portable,native) makes one code variant per CPU, the best one the running CPU supports picked at run time. Checked at run time: NAME_ERROR_UNSUPPORTED_CPU on a CPU without the features");
  compile_cmd->add_option("-O", compile.opt_level, "Optimization level 0-3 (default 2)");
  compile_cmd->add_option("--emit", compile.emit,
                          "Artifacts: obj,header,manifest (default), asm, llvm-ir, graph, test-harness (NAME_test.c), "
                          "bench-harness (NAME_bench.c)")
      ->delimiter(',');
  compile_cmd->add_option("--weights-mode", compile.weights_mode,
                          "embed (default: weights in the object) or external (NAME.weights.bin, loaded at run time)");
  compile_cmd->add_option("--threads", compile.threads,
                          "Must be 1: threads are chosen at run time (NAME_set_num_threads or NAME_set_parallel_for)");
  compile_cmd->add_option("-j,--jobs", compile.jobs,
                          "Code generation threads (default: the hardware threads; 1 = serial): CPU subgraph "
                          "definitions, GPU architectures. The artifacts are the same bytes for every N")
      ->type_name("N");
  compile_cmd->add_flag("--time-passes", compile.time_passes, "Print where compile time went");
  compile_cmd->add_flag("--manifest-timings", compile.manifest_timings,
                        "Record per-stage compile times in the manifest (makes it differ between compiles)");
  compile_cmd->add_flag("--print-outputs", compile.print_outputs, "List the files a compile would write, and exit");
  compile_cmd->add_flag("--verify-reproducible", compile.verify_reproducible, "Compile twice; fail if artifacts differ");
  compile_cmd->add_flag("--MD", compile.depfile, "(-MD) Write a Make/Ninja depfile (OUT.o.d, or -MF FILE)");
  compile_cmd->add_option("--MF", compile.depfile_path, "(-MF FILE) Depfile path (implies -MD)");
  compile_cmd->add_option("--gpu", compile.gpu,
                          "GPU architectures, comma-separated: AMD (gfx90a, gfx942, gfx1100, mi300x, ...: a HIP "
                          "artifact, link -lamdhip64) or NVIDIA (sm_80, sm_90, ...: a CUDA artifact, link -lcuda) "
                          "instead of a CPU one");
  compile_cmd->add_flag("--profile", compile.profile,
                        "A profile build: every kernel timed and counted; NAME_profile_report(FILE *) prints the "
                        "table (docs/profiling.md). CPU only");
  compile_cmd->add_option("--tensor-parallel", compile.tensor_parallel,
                          "Split the model among N ranks (Megatron-style, docs/tensor-parallel.md): one program "
                          "per rank, NAME_rankR (OUT_rankR.o ...), each with its slice of the weights and "
                          "NAME_rankR_set_communicator. CPU only");
  compile_cmd->add_option("--rank", compile.rank, "With --tensor-parallel: compile only this rank's program");
  compile_cmd->add_option("--code-object-version", compile.code_object_version,
                          "AMDGPU code object version with --gpu: 4, 5 (default) or 6");

  auto *ops_cmd = app.add_subcommand("ops", "List the ops this build knows, with attributes");

  bool targets_json = false;
  auto *targets_cmd = app.add_subcommand("targets", "List every backend's targets: CPUs and triples (cpu), GPU architectures (amdgpu)");
  targets_cmd->add_flag("--json", targets_json, "Print JSON");

  InspectOptions inspect;
  auto *inspect_cmd =
      app.add_subcommand("inspect", "Show what a compiled artifact (object, header or manifest) holds and how to call it");
  inspect_cmd->add_option("file", inspect.file, "NAME.o, NAME.h or NAME.manifest.json")->required();
  inspect_cmd->add_flag("--json", inspect.json, "Print JSON");

  DiffOptions diff;
  auto *diff_cmd = app.add_subcommand(
      "diff", "Compare two manifests: interface changes (breaking, exit 3) and size/kernel/target changes");
  diff_cmd->add_option("before", diff.before, "The old NAME.manifest.json")->required();
  diff_cmd->add_option("after", diff.after, "The new NAME.manifest.json")->required();
  diff_cmd->add_flag("--json", diff.json, "Print JSON");

  // Compiler habits: -MD / -MF are single-dash long options, which CLI11
  // does not have; spell them as --MD / --MF before parsing.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-MD" || a == "-MF" || a.rfind("-MF=", 0) == 0)
      a = "-" + a;
    args.push_back(a);
  }
  std::reverse(args.begin(), args.end()); // CLI11 takes them in reverse order

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::cerr << "maxc: error: " << e.what() << "\nRun 'maxc --help' for usage.\n";
    return kInputError;
  }

  auto logger = spdlog::stderr_color_mt("maxc");
  spdlog::set_default_logger(logger);
  spdlog::set_level(global.quiet ? spdlog::level::err
                    : verbosity >= 2 ? spdlog::level::trace
                    : verbosity == 1 ? spdlog::level::debug
                                     : spdlog::level::warn);
  if (!log_level.empty())
    spdlog::set_level(spdlog::level::from_str(log_level));
  global.diagnostics = diagnostics == "json"    ? DiagnosticsFormat::json
                       : diagnostics == "sarif" ? DiagnosticsFormat::sarif
                                                : DiagnosticsFormat::text;
  for (const std::string &d : onnx_dims) {
    size_t eq = d.find('=');
    char *end = nullptr;
    long long n = eq == std::string::npos ? -1 : std::strtoll(d.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || *end != '\0' || n < 0) {
      std::cerr << "maxc: error[E0002]: --dim: expected NAME=N with N >= 0, got '" << d << "'\n";
      return 1;
    }
    global.onnx_dims[d.substr(0, eq)] = n;
  }
  for (const std::string &d : max_dims) {
    size_t eq = d.find('=');
    char *end = nullptr;
    long long n = eq == std::string::npos ? -1 : std::strtoll(d.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || *end != '\0' || n < 0) {
      std::cerr << "maxc: error[E0002]: --max-dim: expected NAME=N with N >= 0, got '" << d << "'\n";
      return 1;
    }
    global.max_dims[d.substr(0, eq)] = n;
  }
  for (const std::string &b : binds) {
    size_t eq = b.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == b.size()) {
      std::cerr << "maxc: error[E0002]: --bind: expected NAME=VALUES (numbers separated by commas, or a .npy file), got '"
                << b << "'\n";
      return 1;
    }
    global.bound_inputs[b.substr(0, eq)] = b.substr(eq + 1);
  }
  for (const std::string &sh : shards) {
    size_t eq = sh.rfind('=');
    if (eq == std::string::npos || eq == 0 || sh.substr(eq + 1) != "replicated") {
      std::cerr << "maxc: error[E0002]: --shard: expected PATTERN=replicated (column and row splits follow from the "
                   "graph), got '"
                << sh << "'\n";
      return 1;
    }
    global.shard_replicated.push_back(sh.substr(0, eq));
  }
  // --shard only means something to a split model: never ignored silently.
  bool splitting = (*trace_cmd && trace.tensor_parallel > 1) || (*run_cmd && run.tensor_parallel > 1) ||
                   (*compile_cmd && compile.tensor_parallel > 1);
  if (!shards.empty() && !splitting) {
    std::cerr << "maxc: error[E0002]: --shard: only with --tensor-parallel N (N >= 2) on trace, run or compile\n";
    return 1;
  }
  inspect.json = inspect.json || version_json;
  diff.json = diff.json || version_json;
  trace.emit_given = trace_cmd->count("--emit") > 0;
  compile.output_given = compile_cmd->count("--output") > 0;
  run.generate_given = run_cmd->count("--generate") > 0;
  run.output_dir_given = run_cmd->count("--output-dir") > 0;
  compile.jobs_given = compile_cmd->count("--jobs") > 0;
  profile.top_given = profile_cmd->count("--top") > 0;
  profile.json = profile.json || version_json;

  try {
    if (version)
      return print_version(version_json);
    if (*check_cmd)
      return run_check(global, check);
    if (*trace_cmd)
      return run_trace(global, trace);
    if (*run_cmd)
      return run_run(global, run);
    if (*profile_cmd)
      return run_profile(global, profile);
    if (*compile_cmd)
      return run_compile(global, compile);
    if (*init_cmd)
      return run_init_weights(global, init);
    if (*ops_cmd)
      return run_ops(global, version_json);
    if (*targets_cmd)
      return run_targets(global, targets_json || version_json);
    if (*inspect_cmd)
      return run_inspect(global, inspect);
    if (*diff_cmd)
      return run_diff(global, diff);
    std::cerr << app.help();
    return kInputError;
  } catch (const maxc::Error &e) {
    std::cerr << "maxc: " << e.formatted() << "\n";
    return e.code() == maxc::ErrorCode::Internal ? kInternalError : kInputError;
  } catch (const std::exception &e) {
    std::cerr << "maxc: internal error: " << e.what() << "\n";
    return kInternalError;
  }
}
