// The C header of a compiled model: plain C99, usable from C++, documenting
// itself — shapes, dtypes, entry points, status codes.
#include "maxc/Codegen/HeaderEmitter.h"
#include "maxc/Support/Sha256.h"
#include "maxc/Support/Version.h"

#include <cctype>
#include <cstdio>

namespace maxc {

static std::string upper(const std::string &s) {
  std::string out;
  for (char c : s)
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// An ABI hash over everything that decides how the entry points are called:
// changes exactly when a caller would have to change.
// The status table as #defines: one convention for every backend.
static std::string status_defines(const std::string &N, bool gpu, bool state = false, bool collectives = false) {
  std::string h;
  for (const StatusInfo &s : status_codes(gpu, state, collectives))
    h += "#define " + N + "_" + s.macro + " " + std::to_string(static_cast<int32_t>(s.status)) + "\n";
  return h;
}

// A tensor-parallel rank's program: the communicator it calls
// (docs/tensor-parallel.md; RuntimePool.c has the same layout).
static std::string communicator_api(const ModelInterface &m, const std::string &N) {
  std::string h;
  h += "/* Tensor parallelism: this is one rank's program of a model split among\n"
       " * " + N + "_TENSOR_PARALLEL_WORLD ranks (maxc compile --tensor-parallel). Its\n"
       " * collectives call the communicator installed here (before the first run;\n"
       " * it must outlive the runs): every rank runs its program with the same\n"
       " * dims, its collectives in the same order. all_reduce_sum_f32 sums `count`\n"
       " * floats over the ranks in place (the same bits on every rank);\n"
       " * all_gather writes every rank's `bytes` bytes side by side, rank 0's\n"
       " * first. Each returns 0, or nonzero on failure: the run then returns\n"
       " * " + N + "_ERROR_COLLECTIVE (as it does without a communicator, or with\n"
       " * one of another world). docs/tensor-parallel.md has one over MPI. */\n";
  h += "#define " + N + "_TENSOR_PARALLEL_WORLD " + std::to_string(m.world) + "\n";
  h += "#ifndef MAXC_COMM_DEFINED\n#define MAXC_COMM_DEFINED\n";
  h += "typedef struct maxc_comm {\n"
       "  int32_t rank, world;\n"
       "  void *ctx;\n"
       "  int32_t (*all_reduce_sum_f32)(void *ctx, float *data, int64_t count);\n"
       "  int32_t (*all_gather)(void *ctx, const void *in, void *out, int64_t bytes);\n"
       "} maxc_comm;\n#endif\n";
  h += "void " + m.name + "_set_communicator(const maxc_comm *comm);\n\n";
  return h;
}

// A model's own name inside a C comment: printable ASCII only (other bytes
// as \xNN), and never a comment end.
static std::string comment_text(const std::string &name) {
  std::string out;
  char hex[8];
  for (unsigned char ch : name) {
    if (ch < 0x20 || ch >= 0x7f || ch == '\\') {
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      out += hex;
    } else if ((ch == '/' && !out.empty() && out.back() == '*') || (ch == '*' && !out.empty() && out.back() == '/')) {
      out += ch == '/' ? "\\x2f" : "\\x2a"; // neither "*/" nor "/*" inside the comment
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

// One tensor's line of the leading comment; the model's own name follows
// when the C name differs (a mangled ONNX name, a C keyword).
static std::string tensor_line(const ModelInterface::Tensor &t) {
  std::string h = " *   " + t.name + ": " + t.type.to_string() + "  (" + c_type_name(t.type.dtype) + ", row-major)";
  if (!t.source_name.empty() && t.source_name != t.name)
    h += "  model name \"" + comment_text(t.source_name) + "\"";
  return h + "\n";
}

// The tensors and dims, in the comment every header starts with (maxc
// inspect reads them back).
static std::string tensor_comment(const ModelInterface &m) {
  std::string h = " * Inputs:\n";
  for (const auto &t : m.inputs)
    h += tensor_line(t);
  h += " * Outputs:\n";
  for (const auto &t : m.outputs)
    h += tensor_line(t);
  if (!m.symbols.empty()) {
    h += " * Symbolic dims, passed at run time:";
    for (const auto &s : m.symbol_params)
      h += " " + s;
    h += "\n";
  }
  return h;
}

// The state API of a model with state (ModelState): a state object owns
// the buffers, NAME_step runs the model on it. `gpu_alloc`: the GPU
// runtime's allocator ("hipMalloc"), null for the CPU.
static std::string state_api(const ModelInterface &m, const std::string &N, const char *gpu_alloc = nullptr) {
  const ModelState &st = *m.state;
  std::string buffers, step_params, step_args;
  for (size_t i = 0, k = 0; i < m.inputs.size(); ++i) {
    const auto &t = m.inputs[i];
    if (t.state) {
      buffers += " *   " + t.name + ": " + std::to_string(m.state_row_bytes[k++]) + " bytes per row\n";
      continue;
    }
    step_params += "const " + std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
    step_args += t.name + ", ";
  }
  for (const auto &t : m.outputs) {
    step_params += std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
    step_args += t.name + ", ";
  }
  for (size_t i = 0; i < m.symbols.size(); ++i)
    if (m.symbols[i] != st.length && m.symbols[i] != st.capacity) {
      step_params += "int64_t " + m.symbol_params[i] + ", ";
      step_args += m.symbol_params[i] + ", ";
    }
  if (!step_params.empty())
    step_params.resize(step_params.size() - 2);
  if (!step_args.empty())
    step_args.resize(step_args.size() - 2);
  std::string h;
  h += "/* Model state (a KV cache). A state object owns the state buffers, each\n"
       " * of capacity rows (" + st.capacity + "), of which the first `length` (" + st.length +
       ") are filled:\n" + buffers +
       " * " + m.name + "_step runs the model on a state, appending " + st.advance.to_string() +
       " rows: a prefill is a\n"
       " * step with many rows, a decode step one. Several states (one per\n"
       " * conversation) may live in one process; a state is used by one thread at\n"
       " * a time, different states by different threads at once. The state keeps\n"
       " * its own workspace (grown on demand). " + m.name + "_run takes the buffers directly\n"
       " * (caller-owned, with " + st.length + " and " + st.capacity + " as dims) and returns " + N +
       "_ERROR_STATE_FULL\n"
       " * when " + st.length + " + " + st.advance.to_string() + " > " + st.capacity + ". */\n";
  if (gpu_alloc)
    h += "/* On the GPU each state holds a context of its own (" + m.name + "_init at\n"
         " * create: the code and the weights, " + std::to_string(m.constant_bytes) +
         " bytes, loaded once per state), its buffers\n"
         " * and workspace are device memory (" + gpu_alloc + "), the tensors " + m.name +
         "_step takes\n"
         " * are device pointers, and it runs on the default stream (NULL). */\n";
  h += "typedef struct " + m.name + "_state " + m.name + "_state;\n";
  h += "/* A zeroed state of `max_context` rows; NULL when out of memory or\n"
       " * max_context is not in [1, 2^40]. */\n";
  h += m.name + "_state *" + m.name + "_state_create(int64_t max_context);\n";
  h += "void " + m.name + "_state_destroy(" + m.name + "_state *state); /* NULL: nothing */\n";
  h += "void " + m.name + "_state_reset(" + m.name + "_state *state);   /* length 0 (rows kept, unread) */\n";
  h += "int64_t " + m.name + "_state_length(const " + m.name + "_state *state);   /* -1 for NULL */\n";
  h += "int64_t " + m.name + "_state_capacity(const " + m.name + "_state *state); /* -1 for NULL */\n";
  h += "/* Runs the model on `state` (" + st.length + " = its length, " + st.capacity +
       " = its capacity), then\n"
       " * advances its length by " + st.advance.to_string() + ". " + N +
       "_ERROR_STATE_FULL (nothing run) when the rows do\n"
       " * not fit. Usage: " + m.name + "_step(state" + (step_args.empty() ? "" : ", " + step_args) + "); */\n";
  h += "int32_t " + m.name + "_step(" + m.name + "_state *state" + (step_params.empty() ? "" : ", " + step_params) +
       ");\n\n";
  return h;
}

static uint64_t abi_hash(const ModelInterface &m) {
  std::string text = m.name;
  for (const auto &t : m.inputs)
    text += "|in " + t.name + " " + t.type.to_string();
  for (const auto &t : m.outputs)
    text += "|out " + t.name + " " + t.type.to_string();
  for (const auto &s : m.symbols)
    text += "|dim " + s;
  if (m.state) { // the state API's signatures
    text += "|state " + m.state->length + " " + m.state->capacity + " " + m.state->advance.to_string();
    for (const auto &t : m.inputs)
      text += t.state ? "|state-buffer " + t.name : "";
  }
  if (m.external_weights)
    text += "|external-weights";
  if (m.world > 0) // a rank's program: NAME_set_communicator
    text += "|tensor-parallel " + std::to_string(m.world);
  return fnv1a64(text);
}

std::string emit_c_header(const ModelInterface &m, const Dim &workspace_bound) {
  const std::string N = upper(m.name);
  std::string guard = N + "_MAXC_H";
  std::string h;
  h += "/* " + m.name + ".h: generated by maxc " + maxc_version() + ". Do not edit. */\n";
  h += "/*\n * Model '" + m.name + "' compiled ahead of time by maxc. Link the object file with\n"
       " * libc and libm only (for example: cc app.c " + m.name + ".o -lm; add -lpthread\n"
       " * before glibc 2.34).\n *\n";
  h += tensor_comment(m);
  h += " *\n * Usage:\n *   int32_t status = " + m.name + "_run(";
  std::string args;
  for (const auto &t : m.inputs)
    args += t.name + ", ";
  for (const auto &t : m.outputs)
    args += t.name + ", ";
  for (const auto &s : m.symbol_params)
    args += s + ", ";
  h += args + "NULL);\n *   if (status != " + N + "_OK) fprintf(stderr, \"%s\\n\", " + m.name +
       "_status_string(status));\n";
  h += " * Passing NULL as the workspace makes the call malloc and free its own;\n"
       " * to avoid that, pass a 64-byte aligned buffer of " + m.name + "_workspace_size(...) bytes.\n"
       " * The workspace must not overlap the inputs or outputs (the code assumes it does not).\n"
       " * Calls are reentrant as long as concurrent calls use different workspaces.\n */\n";
  h += "#ifndef " + guard + "\n#define " + guard + "\n\n#include <stdint.h>\n" +
       (m.profile ? "#include <stdio.h>\n" : "") + "\n";
  h += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  char hash[32];
  std::snprintf(hash, sizeof hash, "0x%016llxull", static_cast<unsigned long long>(abi_hash(m)));
  h += "/* Changes whenever the entry points' signatures or tensor types change. */\n";
  h += "#define " + N + "_ABI_VERSION 1\n#define " + N + "_ABI_HASH " + hash + "\n\n";
  h += "/* Status codes. */\n" + status_defines(N, false, m.state.has_value(), m.world > 0) + "\n";
  auto shape_macros = [&](const char *kind, const std::vector<ModelInterface::Tensor> &ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      const auto &t = ts[i];
      std::string p = N + "_" + kind + "_" + upper(t.name);
      h += "#define " + p + "_INDEX " + std::to_string(i) + "\n";
      h += "#define " + p + "_RANK " + std::to_string(t.type.rank()) + "\n";
      h += "#define " + p + "_DTYPE \"" + std::string(dtype_name(t.type.dtype)) + "\"\n";
      for (size_t d = 0; d < t.type.shape.size(); ++d)
        if (t.type.shape[d].is_static())
          h += "#define " + p + "_DIM" + std::to_string(d) + " " + std::to_string(t.type.shape[d].value()) + "\n";
        else
          h += "/* " + p + "_DIM" + std::to_string(d) + " is symbolic: " + t.type.shape[d].to_string() + " */\n";
    }
  };
  h += "/* Tensor shapes (static dims only) and dtypes. */\n";
  shape_macros("INPUT", m.inputs);
  shape_macros("OUTPUT", m.outputs);
  h += "#define " + N + "_NUM_INPUTS " + std::to_string(m.inputs.size()) + "\n";
  h += "#define " + N + "_NUM_OUTPUTS " + std::to_string(m.outputs.size()) + "\n";
  h += "#define " + N + "_NUM_DIMS " + std::to_string(m.symbols.size()) + "\n";
  h += "#define " + N + "_CONSTANT_BYTES " + std::to_string(m.constant_bytes) + "ull\n";
  if (workspace_bound.is_static() && workspace_bound.value() >= 0)
    h += "#define " + N + "_WORKSPACE_BYTES_MAX " + workspace_bound.to_string() + "ull\n\n";
  else
    h += "/* Workspace bytes, at most: " + workspace_bound.to_string() + " (see " + m.name + "_workspace_size). */\n\n";

  std::string params;
  for (const auto &t : m.inputs) // a state buffer is written in place
    params += (t.state ? "" : "const ") + std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
  for (const auto &t : m.outputs)
    params += std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
  for (const auto &s : m.symbol_params)
    params += "int64_t " + s + ", ";
  std::string dims_params;
  for (size_t i = 0; i < m.symbol_params.size(); ++i)
    dims_params += (i ? ", " : "") + std::string("int64_t ") + m.symbol_params[i];
  h += "/* Runs the model. Returns " + N + "_OK or an error status. */\n";
  h += "int32_t " + m.name + "_run(" + params + "void *workspace);\n\n";
  if (reports_defined_symbols(m)) {
    // Outputs sized by dims the model reads from values at run time.
    std::string list;
    for (size_t k = 0; k < m.defined_symbols.size(); ++k)
      list += (k ? ", " : " ") + m.defined_symbols[k] + " (at most " + std::to_string(m.defined_bounds[k]) + ")";
    h += "/* The same with buffers[inputs..., outputs...] and dims[] arrays. Some outputs'\n"
         " * sizes are known only at run time: dims[] holds " + N + "_NUM_DIMS values, then\n"
         " * " + N + "_NUM_RUN_TIME_DIMS more that the run writes (on " + N + "_OK):" + list + ".\n"
         " * Size output buffers by those bounds. */\n";
    h += "#define " + N + "_NUM_RUN_TIME_DIMS " + std::to_string(m.defined_symbols.size()) + "\n";
    h += "int32_t " + m.name + "_run_packed(void *const *buffers, int64_t *dims, void *workspace);\n\n";
  } else {
    h += "/* The same with buffers[inputs..., outputs...] and dims[] arrays. */\n";
    h += "int32_t " + m.name + "_run_packed(void *const *buffers, const int64_t *dims, void *workspace);\n\n";
  }
  h += "/* Bytes of workspace a run needs for these dims (64-byte aligned); -1 for dims\n"
       " * " + m.name + "_run rejects with " + N + "_ERROR_INVALID_DIM (negative, above 2^40, or\n"
       " * a workspace size that overflows int64_t). */\n";
  h += "int64_t " + m.name + "_workspace_size(" + (dims_params.empty() ? "void" : dims_params) + ");\n\n";
  if (m.state)
    h += state_api(m, N);
  h += "/* Multithreading. The model carries a thread pool of its own (pthreads),\n"
       " * off by default: " + m.name + "_set_num_threads(n) runs its large kernels on n\n"
       " * threads (the calling thread and n - 1 workers, started at the next run;\n"
       " * waiting workers spin briefly, then sleep). n <= 1 (the default) joins the\n"
       " * workers; do that before unloading the code (dlclose). The environment\n"
       " * (MAXC_NUM_THREADS, OMP_NUM_THREADS) is not read. Results are the same bits\n"
       " * at any thread count. A run that starts while another holds the pool runs\n"
       " * its tasks on its own thread.\n"
       " * Or the program installs its own parallel-for, which then replaces the\n"
       " * pool: it must call task(ctx, i) for every i in [0, count), in any order and\n"
       " * on any threads, and return when all are done; NULL goes back to the pool.\n"
       " * Call both before runs, not while one is in progress. */\n";
  h += "void " + m.name + "_set_num_threads(int32_t n);\n";
  h += "typedef void (*" + m.name + "_task_fn)(void *ctx, int64_t i);\n";
  h += "typedef void (*" + m.name + "_parallel_for_fn)(void *ctx, int64_t count, " + m.name + "_task_fn task);\n";
  h += "void " + m.name + "_set_parallel_for(" + m.name + "_parallel_for_fn parallel_for);\n\n";
  if (m.world > 0)
    h += communicator_api(m, N);
  if (m.external_weights) {
    char checksum[32];
    std::snprintf(checksum, sizeof checksum, "0x%016llxull",
                  static_cast<unsigned long long>(m.weights_blob_checksum));
    h += "/* External weights (--weights-mode external): load " + m.name + ".weights.bin into\n"
         " * 64-byte aligned memory (or mmap it) and pass it before the first run; it is\n"
         " * checked by size, alignment and checksum (maxc's lanes64, docs/manifest.md),\n"
         " * and must stay alive and unchanged. */\n";
    h += "#define " + N + "_WEIGHTS_BYTES " + std::to_string(m.weights_blob_bytes) + "ull\n";
    h += "#define " + N + "_WEIGHTS_CHECKSUM " + checksum + "\n";
    h += "int32_t " + m.name + "_set_weights(const void *weights, uint64_t size);\n\n";
  }
  h += "/* A message for a status code. */\n";
  h += "const char *" + m.name + "_status_string(int32_t status);\n\n";
  if (!m.cpu.empty()) {
    std::string features;
    for (const std::string &f : m.cpu_features)
      features += (features.empty() ? "" : ",") + f;
    h += "/* The CPU the code was compiled for (maxc compile --cpu) and the instruction\n"
         " * set features beyond the architecture's baseline it uses. */\n";
    h += "#define " + N + "_CPU \"" + m.cpu + "\"\n";
    h += "#define " + N + "_CPU_FEATURES \"" + features + "\"\n";
    h += "/* " + N + "_OK when this CPU has them all, else " + N + "_ERROR_UNSUPPORTED_CPU,\n"
         " * which " + m.name + "_run also returns (it checks once, before its first run, and\n"
         " * runs nothing compiled for them on a CPU that lacks one); " + m.name + "_status_string\n"
         " * then names the missing features. */\n";
    h += "int32_t " + m.name + "_check_cpu(void);\n";
    h += "/* With several CPUs (--cpu A,B: one code variant each, " + N + "_CPU lists them)\n"
         " * runs use the one this CPU supports with the most features (" + N + "_CPU_FEATURES:\n"
         " * what the least demanding needs). Its index in that list; -1 when none runs here. */\n";
    h += "#define " + N + "_CPU_VARIANTS " + std::to_string(m.cpu_variants) + "\n";
    h += "int32_t " + m.name + "_cpu_variant(void);\n";
    h += "\n";
  }
  if (m.profile) {
    h += "/* Profile build (maxc compile --profile; docs/profiling.md): every kernel's\n"
         " * wall time, calls and threads are counted from the first run (or the last\n"
         " * reset) on. " + m.name + "_profile_report writes them, most time first, one\n"
         " * tab-separated line per kernel: rank, ms per run, share of the kernels'\n"
         " * time, calls per run, threads, kernel, graph, model nodes. Count one run at a\n"
         " * time (concurrent runs mix their counts). */\n";
    h += "#define " + N + "_PROFILE 1\n";
    h += "void " + m.name + "_profile_report(FILE *file);\n";
    h += "void " + m.name + "_profile_reset(void);\n\n";
  }
  h += "#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* " + guard + " */\n";
  return h;
}

std::string emit_gpu_c_header(const ModelInterface &m, const std::vector<std::string> &arches,
                              const Dim &bound, bool cuda) {
  const std::string N = upper(m.name);
  std::string guard = N + "_GPU_H";
  std::string h;
  h += "/* " + m.name + ".h: generated by maxc " + maxc_version() + ". Do not edit. */\n";
  h += "/*\n * Model '" + m.name + "' compiled ahead of time by maxc for " + (cuda ? "NVIDIA" : "AMD") + " GPUs (";
  for (size_t i = 0; i < arches.size(); ++i)
    h += (i ? ", " : "") + arches[i];
  if (cuda)
    h += ").\n * Link: cc app.c " + m.name + ".o -lcuda (CUDA driver API; the object embeds PTX per\n"
         " * architecture, and cubins where ptxas was found, and loads the first the\n"
         " * device accepts at " + m.name + "_init, in its current or primary context).\n *\n";
  else
    h += ").\n * Link: cc app.c " + m.name + ".o -lamdhip64 (ROCm HIP runtime; the object embeds one\n"
         " * code object per architecture and picks the device's at " + m.name + "_init).\n *\n";
  h += tensor_comment(m);
  h += std::string(" *\n * All tensor pointers are device memory (") + (cuda ? "cuMemAlloc" : "hipMalloc") +
       "); kernels are launched on\n * `stream` (a " + (cuda ? "CUstream" : "hipStream_t") +
       "; NULL = the default stream) and run asynchronously.\n"
       " * A context is not thread-safe: use one per thread or stream.\n */\n";
  h += "#ifndef " + guard + "\n#define " + guard + "\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "typedef struct " + m.name + "_context " + m.name + "_context;\n\n";
  h += "/* Status codes. */\n" + status_defines(N, true, m.state.has_value()) + "\n";
  h += "/* Loads the code object for the current device and uploads the weights\n"
       " * (" + std::to_string(m.constant_bytes) + " bytes). Returns " + N + "_ERROR_NO_DEVICE without a GPU. */\n";
  h += "int32_t " + m.name + "_init(" + m.name + "_context **ctx);\n";
  h += "void " + m.name + "_destroy(" + m.name + "_context *ctx);\n\n";
  h += "/* Runs the model. workspace: NAME_workspace_size() bytes of device memory, or\n"
       " * NULL to allocate one for this call (which then synchronizes the stream). */\n";
  h += "int32_t " + m.name + "_run(" + m.name + "_context *ctx";
  for (const auto &t : m.inputs) // a state buffer is written in place
    h += std::string(t.state ? ", " : ", const ") + c_type_name(t.type.dtype) + " *" + t.name;
  for (const auto &t : m.outputs)
    h += ", " + std::string(c_type_name(t.type.dtype)) + " *" + t.name;
  for (const auto &s : m.symbol_params)
    h += ", int64_t " + s;
  h += ", void *workspace, void *stream);\n";
  h += "int32_t " + m.name + "_run_packed(" + m.name +
       "_context *ctx, void *const *buffers, const int64_t *dims, void *workspace, void *stream);\n";
  h += "/* At most " + bound.to_string() + " bytes; -1 for dims " + m.name + "_run rejects. */\nint64_t " + m.name +
       "_workspace_size(";
  for (size_t i = 0; i < m.symbol_params.size(); ++i)
    h += (i ? ", int64_t " : "int64_t ") + m.symbol_params[i];
  h += std::string(m.symbol_params.empty() ? "void" : "") + ");\n";
  h += "int32_t " + m.name + (cuda ? "_cuda_error" : "_hip_error") + "(const " + m.name + "_context *ctx);\n";
  h += "const char *" + m.name + "_status_string(int32_t status);\n\n";
  if (m.state)
    h += state_api(m, N, cuda ? "cuMemAlloc" : "hipMalloc");
  h += "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return h;
}

} // namespace maxc
