// The maxc subcommands. main.cpp parses the command line (CLI11 stays in that
// one file) and calls these with plain option structs.
//
// Exit codes (documented in `maxc --help`, the README and docs/diagnostics.md):
//   0 success, 1 a problem with the user's input (model, weights, data,
//   command-line usage), 2 an internal error in maxc; `maxc diff` only:
//   3 the two artifacts' interfaces differ.
#pragma once

#include "maxc/Codegen/Target.h"

#include <map>
#include <string>
#include <vector>

namespace maxc::cli {

enum ExitCode : int { kSuccess = 0, kInputError = 1, kInternalError = 2, kInterfaceChanged = 3 };

enum class DiagnosticsFormat { text, json, sarif };

struct GlobalOptions {
  bool quiet = false;
  DiagnosticsFormat diagnostics = DiagnosticsFormat::text;
  bool warnings_as_errors = false;
  // ONNX models (docs/ONNX.md): --dim NAME=VALUE pins, --no-dedup.
  std::map<std::string, int64_t> onnx_dims;
  std::map<std::string, std::string> bound_inputs; // --bind NAME=VALUES
  std::map<std::string, int64_t> max_dims;         // --max-dim NAME=N
  bool no_dedup = false;
  bool no_qdq_fusion = false; // --no-qdq-fusion
  std::string state; // --state auto | IN=OUT,...
  std::string quantize_weights; // --quantize-weights int8 | int4 (compile, run, check, profile, trace)
  std::vector<std::string> shard_replicated; // --shard PATTERN=replicated (with --tensor-parallel)
};

struct CheckOptions {
  std::string model;
  std::string weights;
  bool no_weights = false; // check structure against declared param shapes only
};
int run_check(const GlobalOptions &global, const CheckOptions &options);

struct TraceOptions {
  std::string model;
  std::string weights;
  bool no_weights = false;
  std::string emit = "text"; // text | json | dot
  bool emit_given = false;
  bool stats = false;
  bool embed_constants = false; // json only
  bool canonicalize = false;    // print the graph after the compile step `canonicalize`
  std::string output;          // "" or "-" = stdout
  int tensor_parallel = 1;     // --tensor-parallel N: rank --rank's program (Transforms/Shard.h)
  int rank = 0;
};
int run_trace(const GlobalOptions &global, const TraceOptions &options);

struct RunOptions {
  std::string model;
  std::string weights;
  std::vector<std::string> inputs; // NAME=FILE.npy
  std::string output_dir = ".";
  std::string device = "reference";
  int threads = 1;        // --threads: the cpu device's pool
  std::string max_memory; // --max-memory: "8G", bytes; default: physical memory
  int64_t generate = 0;   // --generate N: greedy tokens after the prompt
  bool generate_given = false;
  bool output_dir_given = false;
  std::string prompt;     // --prompt 1,2,3: the prompt's tokens (else the tokens input's file)
  int64_t max_context = 0; // --max-context: the state's rows; 0 = prompt + N
  int tensor_parallel = 1; // --tensor-parallel N: N ranks on N threads (reference device)
};
int run_run(const GlobalOptions &global, const RunOptions &options);

struct ProfileOptions {
  std::string model;
  std::string weights;
  std::vector<std::string> inputs; // NAME=FILE.npy; the others random
  int threads = 1;                 // the pool's threads (NAME_set_num_threads)
  int runs = 10;                   // timed runs
  int warmup = 2;                  // runs before the counters are reset
  int top = 20;                    // rows shown (0: all)
  bool top_given = false;          // else: 20 in the table, all in the JSON
  bool json = false;
};
/// `maxc profile`: a profile build run in process (docs/profiling.md).
int run_profile(const GlobalOptions &global, const ProfileOptions &options);

struct CompileCommandOptions {
  std::string model;
  std::string weights;
  std::string output;          // OUT.o
  bool output_given = false;   // -o given (-o "" is an error)
  std::string name;            // C symbol prefix; default: the model's name
  std::string target;          // triple
  std::string cpu = kPortableCpu; // maxc compile's default (Codegen/Target.h)
  int opt_level = 2;
  std::vector<std::string> emit; // obj header manifest asm llvm-ir graph test-harness bench-harness
  std::string weights_mode = "embed";
  int threads = 1;
  std::string jobs;            // --jobs N, -j N: code generation threads
  bool jobs_given = false;     // else: the hardware threads
  bool time_passes = false;
  bool print_outputs = false;
  bool verify_reproducible = false;
  bool manifest_timings = false; // per-stage compile times in the manifest (not reproducible)
  bool depfile = false;        // -MD
  std::string depfile_path;    // -MF (default: OUT.o.d)
  std::string gpu;             // --gpu gfx90a,gfx942: an AMD GPU artifact instead of a CPU one
  int code_object_version = 0; // 0 = not given (5 with --gpu)
  bool profile = false;        // --profile: a profile build (NAME_profile_report; docs/profiling.md)
  int tensor_parallel = 1;     // --tensor-parallel N: the rank programs of the model split among N (CPU)
  int rank = -1;               // --rank R: only rank R's (-1: every rank's, one compile each)
};
/// `maxc compile`, with or without --gpu: the lib/Driver pipeline.
int run_compile(const GlobalOptions &global, const CompileCommandOptions &options);

struct InitWeightsOptions {
  std::string model;
  std::string output;
  uint64_t seed = 0;
};
int run_init_weights(const GlobalOptions &global, const InitWeightsOptions &options);

int run_ops(const GlobalOptions &global, bool json);

/// maxc targets: every registered backend's targets (lib/Driver).
int run_targets(const GlobalOptions &global, bool json);

struct InspectOptions {
  std::string file; // NAME.o, NAME.h or NAME.manifest.json
  bool json = false;
};
int run_inspect(const GlobalOptions &global, const InspectOptions &options);

struct DiffOptions {
  std::string before, after; // two NAME.manifest.json files
  bool json = false;
};
/// 0 same interface, 3 the interface changed, 1 a problem with the input.
int run_diff(const GlobalOptions &global, const DiffOptions &options);
int print_version(bool json);

} // namespace maxc::cli
