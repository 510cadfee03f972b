// The C test and benchmark harnesses of a compiled model (see
// HarnessEmitter.h). The generated text is deterministic: it depends on the
// interface and the maxc version only.
#include "maxc/Codegen/HarnessEmitter.h"

#include "maxc/Support/Error.h"
#include "maxc/Support/Version.h"

#include <algorithm>
#include <cctype>

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
const char *type_tag(DType d) {
  switch (d) {
  case DType::f16: return "T_F16";
  case DType::bf16: return "T_BF16";
  case DType::f32: return "T_F32";
  case DType::f64: return "T_F64";
  case DType::i8: return "T_I8";
  case DType::i32: return "T_I32";
  case DType::i64: return "T_I64";
  case DType::boolean: return "T_BOOL";
  }
  return "T_F32";
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
// interface's dims: "4*seq+1" → "(INT64_C(4)*d[1]+INT64_C(1))".
std::string c_dim(const Dim &dim, const std::vector<std::string> &symbols, const std::string &array) {
  std::string text = dim.to_string(), out;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_'))
        ++j;
      std::string symbol = text.substr(i, j - i);
      auto it = std::find(symbols.begin(), symbols.end(), symbol);
      if (it == symbols.end())
        throw Error(ErrorCode::Internal, "dim '" + text + "' uses '" + symbol + "', which is not a dim of the interface");
      out += array + "[" + std::to_string(it - symbols.begin()) + "]";
      i = j;
    } else if (std::isdigit(c)) {
      size_t j = i;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])))
        ++j;
      out += "INT64_C(" + text.substr(i, j - i) + ")";
      i = j;
    } else {
      out += text[i++];
    }
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
  out += "int64_t " + m.name + "_workspace_size(" + (dims.empty() ? "void" : join(dims, ", ")) + ");\n";
  out += "const char *" + m.name + "_status_string(int32_t);\n";
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

// Statements filling shape[i][k] for every tensor of `ts` from d[].
std::string shape_statements(const std::vector<ModelInterface::Tensor> &ts, const std::vector<std::string> &symbols,
                             const std::string &array, const std::string &indent) {
  std::string out;
  for (size_t i = 0; i < ts.size(); ++i)
    for (size_t k = 0; k < ts[i].type.shape.size(); ++k)
      out += indent + array + "[" + std::to_string(i) + "][" + std::to_string(k) +
             "] = " + c_dim(ts[i].type.shape[k], symbols, "d") + ";\n";
  return out;
}

// Shared C, first part: includes and dtype tables (before the model's tables).
const std::string kPrelude = template_text(
#include "templates/harness_prelude.c"
);

// Shared C, second part: conversions, aligned buffers, --dim, shapes.
const std::string kHelpers = template_text(
#include "templates/harness_helpers.c"
);

// The .npy reader and the comparison (test harness only).
const std::string kTestHelpers = template_text(
#include "templates/harness_test_helpers.c"
);

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
                      " * Exit status: 0 PASS, 1 FAIL, 2 usage or file problem.\n";
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
  c += R"C(int main(int argc, char **argv) {
  const char *paths[AT_LEAST_1(NUM_INPUTS + NUM_OUTPUTS)];
  int npaths = 0, i, j, k, passed = 1;
  double rtol = -1, atol = -1;
  int64_t d[AT_LEAST_1(NUM_DIMS)] = {0};
  int bound[AT_LEAST_1(NUM_DIMS)] = {0};
  int64_t in_shape[AT_LEAST_1(NUM_INPUTS)][MAX_RANK], out_shape[AT_LEAST_1(NUM_OUTPUTS)][MAX_RANK];
  npy_array in[AT_LEAST_1(NUM_INPUTS)], expected;
  void *in_data[AT_LEAST_1(NUM_INPUTS)] = {0}, *out_data[AT_LEAST_1(NUM_OUTPUTS)] = {0};
  int32_t status;
  uint16_t one = 1;
  if (*(unsigned char *)&one != 1) {
    fprintf(stderr, "error: this harness reads little-endian .npy data on a little-endian machine only\n");
    return 2;
  }
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) {
      char *end;
      double v;
      if (i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[i]);
        return 2;
      }
      v = strtod(argv[i + 1], &end);
      if (end == argv[i + 1] || *end || !(v >= 0)) {
        fprintf(stderr, "error: %s expects a number >= 0, got '%s'\n", argv[i], argv[i + 1]);
        return 2;
      }
      if (argv[i][2] == 'r')
        rtol = v;
      else
        atol = v;
      ++i;
      continue;
    }
    if (!strcmp(argv[i], "--dim")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "error: --dim needs NAME=N\n");
        return 2;
      }
      if (parse_dim(argv[++i], d, bound) != 0)
        return 2;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
    if (npaths == NUM_INPUTS + NUM_OUTPUTS) {
      fprintf(stderr, "error: too many files: expected %d inputs and %d expected outputs\n", NUM_INPUTS,
              NUM_OUTPUTS);
      usage(stderr);
      return 2;
    }
    paths[npaths++] = argv[i];
  }
  if (npaths != NUM_INPUTS + NUM_OUTPUTS) {
    fprintf(stderr, "error: expected %d input and %d expected-output .npy files, got %d\n", NUM_INPUTS, NUM_OUTPUTS,
            npaths);
    usage(stderr);
    return 2;
  }
  for (i = 0; i < NUM_INPUTS; ++i)
    if (npy_read(paths[i], &in[i]) != 0 ||
        check_array(paths[i], &in[i], "input", input_names[i], input_types[i], input_ranks[i], input_shapes[i]) != 0)
      return 2;

  /* Symbolic dims from the inputs' shapes. */
)C";
  c += bind_statements(m);
  c += R"C(  for (k = 0; k < NUM_DIMS; ++k)
    if (!bound[k]) {
      fprintf(stderr, "error: no input determines symbolic dim '%s': pass --dim %s=N\n", dim_names[k], dim_names[k]);
      return 2;
    }

  /* Every input dim must be what the model says for these dims. */
)C";
  c += shape_statements(m.inputs, m.symbols, "in_shape", "  ");
  c += R"C(  for (i = 0; i < NUM_INPUTS; ++i)
    for (k = 0; k < input_ranks[i]; ++k)
      if (in[i].shape[k] != in_shape[i][k]) {
        fprintf(stderr, "%s: shape ", paths[i]);
        print_shape(stderr, in[i].shape, in[i].rank);
        fprintf(stderr, ", but input '%s' is %s, here ", input_names[i], input_shapes[i]);
        print_shape(stderr, in_shape[i], input_ranks[i]);
        fprintf(stderr, "\n");
        return 2;
      }
  for (i = 0; i < NUM_INPUTS; ++i) {
    if (input_types[i] == T_BF16) { /* read as float32 */
      uint16_t *bits = (uint16_t *)buffer_new((size_t)in[i].count * 2);
      int64_t e;
      for (e = 0; e < in[i].count; ++e)
        bits[e] = float_to_bf16(((const float *)in[i].data)[e]);
      in_data[i] = bits;
    } else {
      in_data[i] = in[i].data;
    }
  }

  /* Outputs. */
)C";
  c += shape_statements(m.outputs, m.symbols, "out_shape", "  ");
  c += R"C(  for (j = 0; j < NUM_OUTPUTS; ++j) {
    int64_t n = numel(out_shape[j], output_ranks[j]);
    if (n < 0) {
      fprintf(stderr, "error: output '%s' (%s) has an invalid shape for these dims\n", output_names[j],
              output_shapes[j]);
      return 2;
    }
    out_data[j] = buffer_new((size_t)n * type_sizes[output_types[j]]);
  }

)C";
  c += "  status = " + run_call(m, "NULL") + ";\n";
  c += "  if (status != 0) {\n    printf(\"FAIL: " + m.name + "_run returned %d: %s\\n\", (int)status, " + m.name +
       "_status_string(status));\n    return 1;\n  }\n";
  c += R"C(  for (j = 0; j < NUM_OUTPUTS; ++j) {
    const char *path = paths[NUM_INPUTS + j];
    int type = output_types[j];
    if (npy_read(path, &expected) != 0 ||
        check_array(path, &expected, "output", output_names[j], type, output_ranks[j], output_shapes[j]) != 0)
      return 2;
    for (k = 0; k < output_ranks[j]; ++k)
      if (expected.shape[k] != out_shape[j][k])
        break;
    if (k < output_ranks[j]) {
      printf("%s: the model's output is ", output_names[j]);
      print_shape(stdout, out_shape[j], output_ranks[j]);
      printf(", %s holds ", path);
      print_shape(stdout, expected.shape, expected.rank);
      printf("\n");
      passed = 0;
    } else if (!compare(j, out_data[j], &expected, out_shape[j], output_ranks[j],
                        rtol >= 0 ? rtol : default_rtol(type), atol >= 0 ? atol : default_atol(type))) {
      passed = 0;
    }
    buffer_free(expected.data);
  }
  for (i = 0; i < NUM_INPUTS; ++i) {
    if (in_data[i] != in[i].data)
      buffer_free(in_data[i]);
    buffer_free(in[i].data);
  }
  for (j = 0; j < NUM_OUTPUTS; ++j)
    buffer_free(out_data[j]);
)C";
  c += "  printf(\"%s: " + m.name + " (%d output%s)\\n\", passed ? \"PASS\" : \"FAIL\", NUM_OUTPUTS, "
       "NUM_OUTPUTS == 1 ? \"\" : \"s\");\n";
  c += "  return passed ? 0 : 1;\n}\n";
  return c;
}

std::string emit_bench_harness(const ModelInterface &m) {
  const std::string file = m.name + "_bench.c", program = m.name + "_bench";
  std::string usage = " *   cc -O2 " + file + " " + m.name + ".o -lm -o " + program + "\n *   ./" + program +
                      " [-n RUNS] [--warmup W] [--dim NAME=N]\n"
                      " *\n"
                      " * Runs " + m.name + "_run W times (default 10), then RUNS times (default 100),\n"
                      " * timing each run, on deterministic pseudo-random inputs; symbolic dims are 1\n"
                      " * unless given with --dim. Prints p50/p90/p99 latency in milliseconds and\n"
                      " * runs per second. The workspace is allocated once, outside the timing.\n";
  std::string c = "/* clock_gettime */\n#define _POSIX_C_SOURCE 199309L\n";
  c += file_comment(m, file, "Benchmark harness: latency percentiles of the compiled model.", usage);
  c += kPrelude;
  c += "#include <time.h>\n\n";
  c += "/* The model's entry points (from " + m.name + ".o). */\n" + declarations(m) + "\n";
  c += model_tables(m);
  c += kHelpers;
  c += kBenchHelpers;
  c += "static void usage(FILE *out) {\n  fprintf(out, \"usage: " + program +
       " [-n RUNS] [--warmup W] [--dim NAME=N]\\n\");\n}\n\n";
  c += R"C(static int parse_count(const char *flag, const char *text, long minimum, long *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < minimum) {
    fprintf(stderr, "error: %s expects an integer >= %ld, got '%s'\n", flag, minimum, text);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  long runs = 100, warmup = 10, r;
  int i, j, k;
  int64_t d[AT_LEAST_1(NUM_DIMS)];
  int bound[AT_LEAST_1(NUM_DIMS)] = {0};
  int64_t in_shape[AT_LEAST_1(NUM_INPUTS)][MAX_RANK], out_shape[AT_LEAST_1(NUM_OUTPUTS)][MAX_RANK];
  void *in_data[AT_LEAST_1(NUM_INPUTS)] = {0}, *out_data[AT_LEAST_1(NUM_OUTPUTS)] = {0}, *workspace;
  int64_t workspace_bytes;
  double *times, sum = 0, wall;
  int32_t status;
  for (k = 0; k < AT_LEAST_1(NUM_DIMS); ++k)
    d[k] = 1;
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc && (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--warmup") || !strcmp(argv[i], "--dim"))) {
      fprintf(stderr, "error: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "-n")) {
      if (parse_count("-n", argv[++i], 1, &runs) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--warmup")) {
      if (parse_count("--warmup", argv[++i], 0, &warmup) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--dim")) {
      if (parse_dim(argv[++i], d, bound) != 0)
        return 2;
    } else {
      fprintf(stderr, "error: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }

)C";
  c += shape_statements(m.inputs, m.symbols, "in_shape", "  ");
  c += shape_statements(m.outputs, m.symbols, "out_shape", "  ");
  c += R"C(  for (i = 0; i < NUM_INPUTS; ++i) {
    int64_t n = numel(in_shape[i], input_ranks[i]);
    if (n < 0) {
      fprintf(stderr, "error: input '%s' (%s) has an invalid shape for these dims\n", input_names[i],
              input_shapes[i]);
      return 2;
    }
    in_data[i] = buffer_new((size_t)n * type_sizes[input_types[i]]);
    fill(in_data[i], input_types[i], n);
  }
  for (j = 0; j < NUM_OUTPUTS; ++j) {
    int64_t n = numel(out_shape[j], output_ranks[j]);
    if (n < 0) {
      fprintf(stderr, "error: output '%s' (%s) has an invalid shape for these dims\n", output_names[j],
              output_shapes[j]);
      return 2;
    }
    out_data[j] = buffer_new((size_t)n * type_sizes[output_types[j]]);
  }
)C";
  c += "  workspace_bytes = " + m.name + "_workspace_size(" + dims_call(m) + ");\n";
  c += R"C(  if (workspace_bytes < 0) {
    fprintf(stderr, "error: invalid dims (the workspace size is %lld)\n", (long long)workspace_bytes);
    return 2;
  }
  workspace = buffer_new((size_t)workspace_bytes);
  times = (double *)malloc((size_t)runs * sizeof *times);
  if (!times) {
    fprintf(stderr, "error: out of memory\n");
    return 2;
  }
  wall = now_ms();
  for (r = 0; r < warmup + runs; ++r) {
    double start = now_ms();
)C";
  c += "    status = " + run_call(m, "workspace") + ";\n";
  c += "    if (status != 0) {\n      fprintf(stderr, \"error: " + m.name + "_run returned %d: %s\\n\", (int)status, " +
       m.name + "_status_string(status));\n      return 1;\n    }\n";
  c += R"C(    if (r >= warmup)
      times[r - warmup] = now_ms() - start;
    else
      wall = now_ms();
  }
  wall = now_ms() - wall;
  for (r = 0; r < runs; ++r)
    sum += times[r];
  qsort(times, (size_t)runs, sizeof *times, by_value);
)C";
  c += "  printf(\"" + m.name + ": %ld runs after %ld warmup\", runs, warmup);\n";
  c += R"C(  for (k = 0; k < NUM_DIMS; ++k)
    printf("%s %s=%lld", k ? "," : ";", dim_names[k], (long long)d[k]);
  printf("\n");
  printf("latency ms: p50 %.4f  p90 %.4f  p99 %.4f  (min %.4f, mean %.4f, max %.4f)\n", percentile(times, runs, 50),
         percentile(times, runs, 90), percentile(times, runs, 99), times[0], sum / (double)runs, times[runs - 1]);
  printf("throughput: %.1f runs/s\n", wall > 0 ? (double)runs / (wall / 1e3) : 0.0);
  for (i = 0; i < NUM_INPUTS; ++i)
    buffer_free(in_data[i]);
  for (j = 0; j < NUM_OUTPUTS; ++j)
    buffer_free(out_data[j]);
  buffer_free(workspace);
  free(times);
  return 0;
}
)C";
  return c;
}

} // namespace maxc
