// The C test and benchmark harnesses of a compiled model (see
// HarnessEmitter.h). The generated text is deterministic: it depends on the
// interface and the maxc version only.
#include "maxc/Codegen/HarnessEmitter.h"

#include "maxc/Support/Error.h"
#include "maxc/Support/Version.h"

#include <algorithm>

namespace maxc {

namespace {

// A template file's text between its MAXC_EMBED markers (see templates/*.c):
// the raw string holds "\")\n#endif\n" + C + "#ifdef MAXC_EMBED\n\"" (the
// quotes keep the markers valid C tokens when the file is compiled as C).
std::string template_text(const char *raw) {
  std::string text = raw;
  const std::string head = "\")\n#endif\n", tail = "#ifdef MAXC_EMBED\n\"";
  if (text.compare(0, head.size(), head) != 0 || text.size() < head.size() + tail.size() ||
      text.compare(text.size() - tail.size(), tail.size(), tail) != 0)
    throw Error(ErrorCode::Internal, "a harness template lost its MAXC_EMBED markers");
  return text.substr(head.size(), text.size() - head.size() - tail.size());
}

/// `text` with each /*@KEY@*/ replaced by its value (every key exactly once).
std::string fill_template(const std::string &text, const std::vector<std::pair<std::string, std::string>> &values) {
  std::string out = text;
  for (const auto &[key, value] : values) {
    std::string marker = "/*@" + key + "@*/";
    size_t at = out.find(marker);
    if (at == std::string::npos || out.find(marker, at + 1) != std::string::npos)
      throw Error(ErrorCode::Internal, "a harness template has no single " + marker);
    out.replace(at, marker.size(), value);
  }
  return out;
}

} // namespace

#define MAXC_EMBED

std::string c_run_prototype(const ModelInterface &m, bool gpu) {
  std::string params;
  for (const auto &t : m.inputs)
    params += "const " + std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
  for (const auto &t : m.outputs)
    params += std::string(c_type_name(t.type.dtype)) + " *" + t.name + ", ";
  // C parameter names (mangled); an interface read back from a manifest or
  // header may only have the dims' names.
  const auto &dims = m.symbol_params.size() == m.symbols.size() ? m.symbol_params : m.symbols;
  for (const auto &s : dims)
    params += "int64_t " + s + ", ";
  if (gpu)
    return "int32_t " + m.name + "_run(" + m.name + "_context *ctx, " + params + "void *workspace, void *stream)";
  return "int32_t " + m.name + "_run(" + params + "void *workspace)";
}

namespace {

// The T_* constant of the generated code for a dtype.
const char *type_tag(DType d) { return dtype_info(d).harness_tag.data(); }

// The harnesses' dtype tables (in the enum's order), from the dtype table:
// the T_* constants, type_names[] and type_sizes[] (the prelude's
// DTYPE_TABLES) and the .npy descr each type is read from, type_descrs[]
// (TYPE_DESCRS; a dtype NumPy lacks is read as its compute dtype: bf16 as f32).
std::string dtype_tables() {
  std::string tags, names, sizes;
  for (const DTypeInfo &d : kDTypeInfo) {
    const char *sep = tags.empty() ? "" : ", ";
    tags += sep + std::string(d.harness_tag);
    names += sep + std::string("\"") + std::string(d.name) + "\"";
    sizes += sep + std::to_string(d.bytes);
  }
  return "enum { " + tags + " };\nMAXC_UNUSED static const char *const type_names[] = {" + names +
         "};\nMAXC_UNUSED static const size_t type_sizes[] = {" + sizes + "};";
}

std::string type_descrs() {
  std::string descrs;
  for (const DTypeInfo &d : kDTypeInfo) {
    std::string_view descr = d.npy_descr.empty() ? dtype_info(d.compute).npy_descr : d.npy_descr;
    descrs += (descrs.empty() ? "\"" : ", \"") + std::string(descr) + "\"";
  }
  return "static const char *const type_descrs[] = {" + descrs + "};";
}

// A C string literal.
std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// A dim as a C expression over `array[k]`, k the symbol's index in the
// interface's dims, from its terms: "4*seq+1" → "(INT64_C(4)*d[1]+INT64_C(1))";
// min/max/floordiv atoms as conditional / division expressions.
std::string c_dim(const Dim &dim, const std::vector<std::string> &symbols, const std::string &array) {
  std::string out;
  std::vector<DimTerm> terms = dim.terms();
  if (terms.empty())
    terms.push_back({0, {}});
  for (size_t i = 0; i < terms.size(); ++i) {
    const DimTerm &t = terms[i];
    if (i || t.coeff < 0)
      out += t.coeff < 0 ? "-" : "+";
    uint64_t mag = t.coeff < 0 ? 0 - static_cast<uint64_t>(t.coeff) : static_cast<uint64_t>(t.coeff);
    std::string body;
    if (t.factors.empty() || mag != 1)
      body = "INT64_C(" + std::to_string(mag) + ")";
    for (const DimAtom &a : t.factors) {
      std::string factor;
      if (a.is_symbol()) {
        auto it = std::find(symbols.begin(), symbols.end(), a.symbol());
        if (it == symbols.end())
          throw Error(ErrorCode::Internal, "dim '" + dim.to_string() + "' uses '" + a.symbol() +
                                               "', which is not a dim of the interface");
        factor = array + "[" + std::to_string(it - symbols.begin()) + "]";
      } else {
        factor = c_dim(a.args()[0], symbols, array);
        for (size_t k = 1; k < a.args().size(); ++k) {
          std::string x = factor, y = c_dim(a.args()[k], symbols, array);
          if (a.kind() == DimAtom::Kind::FloorDiv) // y > 0: truncation, minus 1 for a negative remainder
            factor = "(" + x + "/" + y + "-(" + x + "%" + y + "<0))";
          else
            factor = "(" + x + (a.kind() == DimAtom::Kind::Min ? "<" : ">") + y + "?" + x + ":" + y + ")";
        }
      }
      body += (body.empty() ? "" : "*") + factor;
    }
    out += body;
  }
  return "(" + out + ")";
}

size_t max_rank(const ModelInterface &m) {
  size_t r = 1;
  for (const auto &t : m.inputs)
    r = std::max(r, t.type.shape.size());
  for (const auto &t : m.outputs)
    r = std::max(r, t.type.shape.size());
  return r;
}

std::string join(const std::vector<std::string> &parts, const std::string &sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? sep : "") + parts[i];
  return out;
}

// The entry points, declared without parameter names (a dim called `errno`
// or `stdin` must not meet a libc macro).
std::string declarations(const ModelInterface &m) {
  std::vector<std::string> params;
  for (const auto &t : m.inputs)
    params.push_back("const " + std::string(c_type_name(t.type.dtype)) + " *");
  for (const auto &t : m.outputs)
    params.push_back(std::string(c_type_name(t.type.dtype)) + " *");
  for (size_t i = 0; i < m.symbols.size(); ++i)
    params.push_back("int64_t");
  params.push_back("void *");
  std::vector<std::string> dims(m.symbols.size(), "int64_t");
  std::string out = "/* " + c_run_prototype(m) + "; */\n";
  out += "int32_t " + m.name + "_run(" + join(params, ", ") + ");\n";
  if (reports_defined_symbols(m))
    out += "int32_t " + m.name + "_run_packed(void *const *, int64_t *, void *);\n";
  out += "int64_t " + m.name + "_workspace_size(" + (dims.empty() ? "void" : join(dims, ", ")) + ");\n";
  out += "const char *" + m.name + "_status_string(int32_t);\n";
  out += "void " + m.name + "_set_num_threads(int32_t);\n";
  if (m.external_weights)
    out += "int32_t " + m.name + "_set_weights(const void *, uint64_t);\n";
  return out;
}

// The call of NAME_run with in_data[], out_data[], d[] and `workspace`.
std::string run_call(const ModelInterface &m, const std::string &workspace) {
  std::vector<std::string> args;
  for (size_t i = 0; i < m.inputs.size(); ++i)
    args.push_back("(const " + std::string(c_type_name(m.inputs[i].type.dtype)) + " *)in_data[" +
                   std::to_string(i) + "]");
  for (size_t i = 0; i < m.outputs.size(); ++i)
    args.push_back("(" + std::string(c_type_name(m.outputs[i].type.dtype)) + " *)out_data[" + std::to_string(i) +
                   "]");
  for (size_t i = 0; i < m.symbols.size(); ++i)
    args.push_back("d[" + std::to_string(i) + "]");
  args.push_back(workspace);
  return m.name + "_run(" + join(args, ", ") + ")";
}

// Tables of the model's tensors and dims, shared by both harnesses.
std::string model_tables(const ModelInterface &m) {
  auto names = [](const std::vector<ModelInterface::Tensor> &ts) {
    std::vector<std::string> out;
    for (const auto &t : ts)
      out.push_back(quote(t.name));
    return out.empty() ? std::string("0") : join(out, ", ");
  };
  auto types = [](const std::vector<ModelInterface::Tensor> &ts) {
    std::vector<std::string> out;
    for (const auto &t : ts)
      out.push_back(type_tag(t.type.dtype));
    return out.empty() ? std::string("0") : join(out, ", ");
  };
  auto ranks = [](const std::vector<ModelInterface::Tensor> &ts) {
    std::vector<std::string> out;
    for (const auto &t : ts)
      out.push_back(std::to_string(t.type.shape.size()));
    return out.empty() ? std::string("0") : join(out, ", ");
  };
  auto shapes = [](const std::vector<ModelInterface::Tensor> &ts) {
    std::vector<std::string> out;
    for (const auto &t : ts)
      out.push_back(quote(t.type.to_string()));
    return out.empty() ? std::string("0") : join(out, ", ");
  };
  std::vector<std::string> dims;
  for (const auto &s : m.symbols)
    dims.push_back(quote(s));
  std::string t;
  t += "#define NUM_INPUTS " + std::to_string(m.inputs.size()) + "\n";
  t += "#define NUM_OUTPUTS " + std::to_string(m.outputs.size()) + "\n";
  t += "#define NUM_DIMS " + std::to_string(m.symbols.size()) + "\n";
  t += "#define MAX_RANK " + std::to_string(max_rank(m)) + "\n";
  t += "/* Arrays have at least one element (C has no empty arrays). */\n";
  t += "#define AT_LEAST_1(n) ((n) > 0 ? (n) : 1)\n";
  t += "MAXC_UNUSED static const char *const input_names[AT_LEAST_1(NUM_INPUTS)] = {" + names(m.inputs) + "};\n";
  t += "MAXC_UNUSED static const int input_types[AT_LEAST_1(NUM_INPUTS)] = {" + types(m.inputs) + "};\n";
  t += "MAXC_UNUSED static const int input_ranks[AT_LEAST_1(NUM_INPUTS)] = {" + ranks(m.inputs) + "};\n";
  t += "MAXC_UNUSED static const char *const input_shapes[AT_LEAST_1(NUM_INPUTS)] = {" + shapes(m.inputs) + "};\n";
  t += "MAXC_UNUSED static const char *const output_names[AT_LEAST_1(NUM_OUTPUTS)] = {" + names(m.outputs) + "};\n";
  t += "MAXC_UNUSED static const int output_types[AT_LEAST_1(NUM_OUTPUTS)] = {" + types(m.outputs) + "};\n";
  t += "MAXC_UNUSED static const int output_ranks[AT_LEAST_1(NUM_OUTPUTS)] = {" + ranks(m.outputs) + "};\n";
  t += "MAXC_UNUSED static const char *const output_shapes[AT_LEAST_1(NUM_OUTPUTS)] = {" + shapes(m.outputs) + "};\n";
  t += "MAXC_UNUSED static const char *const dim_names[AT_LEAST_1(NUM_DIMS)] = {" + (dims.empty() ? "0" : join(dims, ", ")) +
       "};\n";
  return t + "\n";
}

// Statements filling shape[i][k] for every tensor of `ts` from the dims
// array `dims` (the symbols' values): the tensors' allocation shapes
// (alloc_shape: a dim defined at run time at its bound), or with
// `run_time` their types' shapes, dims defined at run time included.
std::string shape_statements(const std::vector<ModelInterface::Tensor> &ts, const std::vector<std::string> &symbols,
                             const std::string &array, const std::string &indent, const std::string &dims = "d",
                             bool run_time = false) {
  std::string out;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Shape &shape = run_time ? ts[i].type.shape : ts[i].alloc_shape();
    for (size_t k = 0; k < shape.size(); ++k)
      out += indent + array + "[" + std::to_string(i) + "][" + std::to_string(k) +
             "] = " + c_dim(shape[k], symbols, dims) + ";\n";
  }
  return out;
}

// The test harness's run of a model whose outputs have dims defined at run
// time: NAME_run_packed with room for those dims after the C dims, then the
// outputs' shapes from the values the run wrote (their data is a row-major
// prefix of the buffers, which were allocated at the bounds).
std::string run_packed_statements(const ModelInterface &m) {
  const std::string n_dims = std::to_string(m.symbols.size() + m.defined_symbols.size());
  std::string out = "  {\n    void *buffers[NUM_INPUTS + NUM_OUTPUTS];\n    int64_t rd[" + n_dims + "];\n";
  out += "    for (i = 0; i < NUM_INPUTS; ++i)\n      buffers[i] = in_data[i];\n";
  out += "    for (j = 0; j < NUM_OUTPUTS; ++j)\n      buffers[NUM_INPUTS + j] = out_data[j];\n";
  out += "    for (k = 0; k < " + n_dims + "; ++k)\n      rd[k] = k < NUM_DIMS ? d[k] : 0;\n";
  out += "    status = " + m.name + "_run_packed(buffers, rd, NULL);\n";
  std::vector<std::string> all = m.symbols;
  all.insert(all.end(), m.defined_symbols.begin(), m.defined_symbols.end());
  out += "    if (status == 0) {\n" + shape_statements(m.outputs, all, "out_shape", "      ", "rd", true) + "    }\n";
  return out + "  }\n";
}

// Shared C, first part: includes and dtype tables (before the model's tables).
const std::string kPrelude = fill_template(template_text(
#include "templates/harness_prelude.c"
                                                            ),
                                              {{"DTYPE_TABLES", dtype_tables()}});

// Shared C, second part: conversions, aligned buffers, --dim, shapes.
const std::string kHelpers = template_text(
#include "templates/harness_helpers.c"
);

// The .npy reader and the comparison (the test harness; the bench harness's
// --input reads with it).
const std::string kTestHelpers = fill_template(template_text(
#include "templates/harness_test_helpers.c"
                                                                ),
                                                  {{"TYPE_DESCRS", type_descrs()}});

std::string file_comment(const ModelInterface &m, const std::string &file, const std::string &what,
                         const std::string &usage) {
  std::string c = "/* " + file + ": generated by maxc " + maxc_version() + ". Do not edit. */\n/*\n * " + what +
                  "\n *\n" + usage + " *\n * Model '" + m.name + "':\n";
  for (const auto &t : m.inputs)
    c += " *   input  " + t.name + ": " + t.type.to_string() + "\n";
  for (const auto &t : m.outputs)
    c += " *   output " + t.name + ": " + t.type.to_string() + "\n";
  if (!m.symbols.empty())
    c += " *   symbolic dims: " + join(m.symbols, " ") + "\n";
  return c + " */\n";
}

// Statements binding d[] from the inputs' bare-symbol dims (the test
// harness's inputs are in[i] npy arrays).
std::string bind_statements(const ModelInterface &m) {
  std::string out;
  for (size_t i = 0; i < m.inputs.size(); ++i)
    for (size_t k = 0; k < m.inputs[i].type.shape.size(); ++k) {
      const Dim &dim = m.inputs[i].type.shape[k];
      if (!dim.is_symbol())
        continue;
      auto it = std::find(m.symbols.begin(), m.symbols.end(), dim.symbol());
      if (it == m.symbols.end())
        throw Error(ErrorCode::Internal, "input '" + m.inputs[i].name + "' uses dim '" + dim.symbol() +
                                             "', which is not a dim of the interface");
      out += "  if (bind(d, bound, " + std::to_string(it - m.symbols.begin()) + ", in[" + std::to_string(i) +
             "].shape[" + std::to_string(k) + "], " + std::to_string(i) + ", " + std::to_string(k) +
             ") != 0)\n    return 2;\n";
    }
  return out;
}

// The test harness's binding of d[] from an input's shape, and defaults.
const std::string kTestBind = template_text(
#include "templates/harness_test_bind.c"
);

// The benchmark's inputs, clock and statistics.
const std::string kBenchHelpers = template_text(
#include "templates/harness_bench_helpers.c"
);

std::string dims_call(const ModelInterface &m) {
  std::vector<std::string> args;
  for (size_t i = 0; i < m.symbols.size(); ++i)
    args.push_back("d[" + std::to_string(i) + "]");
  return join(args, ", ");
}

} // namespace

const std::string kTestMain = template_text(
#include "templates/harness_test_main.c"
);

const std::string kBenchMain = template_text(
#include "templates/harness_bench_main.c"
);

// External weights (--weights-mode external): load NAME.weights.bin (or the
// file named by the NAME_WEIGHTS environment variable) into 64-byte aligned
// memory and hand it to NAME_set_weights before the first run.
static std::string load_weights_statements(const ModelInterface &m) {
  if (!m.external_weights)
    return "";
  const std::string env = m.name + "_WEIGHTS", file = m.name + ".weights.bin";
  return "  {\n"
         "    const char *wpath = getenv(\"" + env + "\") ? getenv(\"" + env + "\") : \"" + file + "\";\n"
         "    FILE *wf = fopen(wpath, \"rb\");\n"
         "    long wbytes;\n"
         "    void *weights;\n"
         "    int32_t wstatus;\n"
         "    if (!wf || fseek(wf, 0, SEEK_END) != 0 || (wbytes = ftell(wf)) < 0 || fseek(wf, 0, SEEK_SET) != 0) {\n"
         "      fprintf(stderr, \"error: cannot read the weights file %s (set " + env + " to its path)\\n\", wpath);\n"
         "      return 2;\n"
         "    }\n"
         "    weights = buffer_new((size_t)wbytes);\n"
         "    if (fread(weights, 1, (size_t)wbytes, wf) != (size_t)wbytes) {\n"
         "      fprintf(stderr, \"error: cannot read the weights file %s\\n\", wpath);\n"
         "      return 2;\n"
         "    }\n"
         "    fclose(wf);\n"
         "    wstatus = " + m.name + "_set_weights(weights, (uint64_t)wbytes);\n"
         "    if (wstatus != 0) {\n"
         "      fprintf(stderr, \"error: %s: %s\\n\", wpath, " + m.name + "_status_string(wstatus));\n"
         "      return 2;\n"
         "    }\n"
         "  }\n";
}

std::string emit_test_harness(const ModelInterface &m) {
  const std::string file = m.name + "_test.c", program = m.name + "_test";
  std::string files;
  for (const auto &t : m.inputs)
    files += " " + t.name + ".npy";
  for (const auto &t : m.outputs)
    files += " EXPECTED_" + t.name + ".npy";
  std::string usage = " *   cc -O2 " + file + " " + m.name + ".o -lm -o " + program + "\n *   ./" + program + files +
                      " [--rtol R] [--atol A] [--dim NAME=N]\n"
                      " *\n"
                      " * Loads the inputs, runs " + m.name + "_run and compares each output with the\n"
                      " * expected .npy: |actual - expected| <= atol + rtol * |expected|. Defaults:\n"
                      " * f32 rtol 1e-4 atol 1e-5, f64 1e-9/1e-12, f16 1e-2/1e-3, bf16 2e-2/1e-2,\n"
                      " * integers and bool exact. Symbolic dims come from the inputs' shapes\n"
                      " * (--dim for one that no input has). bf16 tensors are read as float32.\n"
                      " * Exit status: 0 PASS, 1 FAIL, 2 usage or file problem.\n" +
                      (m.external_weights ? " * External weights: reads " + m.name + ".weights.bin from the current\n"
                                            " * directory, or the file named by $" + m.name + "_WEIGHTS.\n"
                                          : std::string());
  std::string c = file_comment(m, file, "Test harness: runs the compiled model on .npy inputs and checks its outputs.",
                               usage);
  c += kPrelude;
  c += "/* The model's entry points (from " + m.name + ".o). */\n" + declarations(m) + "\n";
  c += model_tables(m);
  c += kHelpers;
  c += kTestHelpers;
  c += kTestBind;
  c += "static void usage(FILE *out) {\n  fprintf(out, \"usage: " + program + files +
       " [--rtol R] [--atol A] [--dim NAME=N]\\n\");\n}\n\n";
  std::string run = load_weights_statements(m) + (reports_defined_symbols(m)
                                                       ? run_packed_statements(m)
                                                       : "  status = " + run_call(m, "NULL") + ";\n");
  run += "  if (status != 0) {\n    printf(\"FAIL: " + m.name + "_run returned %d: %s\\n\", (int)status, " + m.name +
         "_status_string(status));\n    return 1;\n  }\n";
  std::string summary = "  printf(\"%s: " + m.name +
                        " (%d output%s)\\n\", passed ? \"PASS\" : \"FAIL\", NUM_OUTPUTS, "
                        "NUM_OUTPUTS == 1 ? \"\" : \"s\");\n  return passed ? 0 : 1;\n}"; // the template adds "\n"
  c += fill_template(kTestMain, {{"BIND_DIMS", bind_statements(m)},
                                 {"INPUT_SHAPES", shape_statements(m.inputs, m.symbols, "in_shape", "  ")},
                                 {"OUTPUT_SHAPES", shape_statements(m.outputs, m.symbols, "out_shape", "  ")},
                                 {"RUN", run},
                                 {"SUMMARY", summary}});
  return c;
}

std::string emit_bench_harness(const ModelInterface &m) {
  const std::string file = m.name + "_bench.c", program = m.name + "_bench";
  std::string usage = " *   cc -O2 " + file + " " + m.name + ".o -lm -o " + program + "\n *   ./" + program +
                      " [-n RUNS] [--warmup W] [--dim NAME=N] [--threads T[,T...]]\n"
                      " *            [--rounds R] [--input NAME=FILE.npy ...]\n"
                      " *\n"
                      " * Runs " + m.name + "_run W times (default 10), then RUNS times (default 100),\n"
                      " * timing each run, on deterministic pseudo-random inputs, or an input's values\n"
                      " * from a .npy file (--input; its dtype and shape the input's for these dims);\n"
                      " * symbolic dims are 1 unless given with --dim. Prints p50/p90/p99 latency in milliseconds and\n"
                      " * runs per second. The workspace is allocated once, outside the timing.\n"
                      " * --threads T: the model's own pool (" + m.name + "_set_num_threads; default 1).\n"
                      " * --threads 1,2 --rounds R: R rounds, each running W + RUNS runs at every\n"
                      " * count in turn (the order reversed every other round), in one process:\n"
                      " * latency per count and the ratio of each count's p50 to the first's.\n";
  std::string c = "/* clock_gettime */\n#define _POSIX_C_SOURCE 199309L\n";
  c += file_comment(m, file, "Benchmark harness: latency percentiles of the compiled model.", usage);
  c += kPrelude;
  c += "#include <time.h>\n\n";
  c += "/* The model's entry points (from " + m.name + ".o). */\n" + declarations(m) + "\n";
  c += model_tables(m);
  c += kHelpers;
  c += kTestHelpers;
  c += kBenchHelpers;
  c += "static void usage(FILE *out) {\n  fprintf(out, \"usage: " + program +
       " [-n RUNS] [--warmup W] [--dim NAME=N] [--threads T[,T...]] [--rounds R]\\n\"\n"
       "              \"       [--input NAME=FILE.npy ...]\\n\");\n}\n\n";
  std::string run = "        status = " + run_call(m, "workspace") + ";\n";
  run += "        if (status != 0) {\n          fprintf(stderr, \"error: " + m.name +
         "_run returned %d: %s\\n\", (int)status, " + m.name +
         "_status_string(status));\n          return 1;\n        }\n";
  c += fill_template(kBenchMain,
                     {{"SHAPES", shape_statements(m.inputs, m.symbols, "in_shape", "  ") +
                                     shape_statements(m.outputs, m.symbols, "out_shape", "  ")},
                      {"WORKSPACE_SIZE", load_weights_statements(m) + "  workspace_bytes = " + m.name +
                                             "_workspace_size(" + dims_call(m) + ");\n"},
                      {"SET_THREADS", "      " + m.name + "_set_num_threads((int32_t)threads);\n"},
                      {"RUN", run},
                      {"HEADLINE", "      printf(\"" + m.name +
                                       ": %ld runs after %ld warmup, %ld thread(s)\", runs, warmup, threads);\n"}});
  return c;
}

} // namespace maxc
