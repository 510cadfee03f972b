// Runs ONNX backend conformance tests (Debian's libonnx-testdata) through
// maxc: the reference interpreter, the compiled CPU path (JIT) and the GPU
// emulator, comparing with each test's expected outputs (ONNX's tolerances:
// rtol 1e-3, atol 1e-7). scripts/onnx-conformance drives it; see docs/ONNX.md.
//
//   maxc-onnx-conformance [options] DIR...      DIR: a test folder or a folder of them
//     --paths ref,cpu,emu   which paths to run (default all three)
//     --table FILE          write the per-op markdown table to FILE
//     --expect FILE         fail (exit 1) unless every test listed in FILE passes
//     --list-passing FILE   write the tests that passed on every path
//     -v                    one line per test
#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Frontend/OnnxLoader.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Diagnostics.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace maxc;

namespace {

// The ops issue #10 lists (CNN and transformer families): the scope of the
// 95 % bar.
const std::set<std::string> kScope = {
    "Conv", "ConvTranspose", "BatchNormalization", "Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Gemm", "Add", "Sub", "Mul", "Div", "Concat", "Pad",
    "Resize", "Softmax", "MatMul", "LayerNormalization", "Erf", "Tanh", "Pow", "Sqrt", "Reciprocal", "Neg", "Sin",
    "Cos", "ReduceMean", "ReduceSum", "ReduceMax", "Transpose", "Reshape", "Gather", "Slice", "Split", "Squeeze",
    "Unsqueeze", "Expand", "Where", "Equal", "Less", "Cast", "Range", "Trilu", "Shape", "ConstantOfShape",
    "Constant", "Identity", "Dropout", "CumSum", "ArgMax", "TopK"};

// Categories excluded from the bar, by op (docs/ONNX.md gives the reasons).
const std::map<std::string, std::string> kExcludedOps = [] {
  std::map<std::string, std::string> m;
  for (const char *op : {"Gradient", "Adagrad", "Adam", "Momentum", "NegativeLogLikelihoodLoss",
                         "SoftmaxCrossEntropyLoss"})
    m[op] = "training";
  for (const char *op : {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
                         "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence",
                         "OptionalGetElement", "OptionalHasElement", "Optional", "StringNormalizer",
                         "TfIdfVectorizer"})
    m[op] = "sequence/optional/string";
  for (const char *op : {"Bernoulli", "RandomUniformLike", "RandomNormalLike", "RandomUniform", "RandomNormal",
                         "Multinomial"})
    m[op] = "random";
  m["If"] = "control flow"; // Loop and Scan on tensors are in the bar (their sequence tests are sequence/optional)
  return m;
}();

// Tests whose expected output an older ONNX computed differently from the
// spec maxc follows (and ONNX Runtime): excluded, with the reason.
const std::map<std::string, std::string> kStaleExpected = {
    {"node/test_cast_FLOAT_to_BFLOAT16",
     "expected output from an older spec: float to bfloat16 by truncation (ONNX >= 1.14 and ONNX Runtime round to "
     "nearest even, as maxc does)"},
};

struct Options {
  bool ref = true, cpu = true, emu = true, verbose = false;
  std::string table, expect, list_passing;
  std::vector<std::string> dirs;
};

enum class Outcome { pass, fail, unsupported };

struct Result {
  std::string name, category, op, reason;
  Outcome outcome = Outcome::unsupported;
  bool in_scope = false;
  std::string excluded; // exclusion category, if any
  bool run_as_given = false; // value-dependent inputs given at run time, as maxc run takes them
  std::string bound_by_run;  // those maxc run binds at import (--bind), comma-separated
};

bool close_enough(const HostTensor &got, const HostTensor &want, double rtol, double atol, std::string &why) {
  if (got.dtype() != want.dtype()) {
    why = "dtype " + std::string(dtype_name(got.dtype())) + " vs expected " + std::string(dtype_name(want.dtype()));
    return false;
  }
  if (got.shape() != want.shape()) {
    why = "shape " + describe(got) + " vs expected " + describe(want);
    return false;
  }
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    if (is_integer(want.dtype()) && got.get_i64(i) != want.get_i64(i)) {
      why = "element " + std::to_string(i) + ": " + std::to_string(got.get_i64(i)) + " vs " +
            std::to_string(want.get_i64(i));
      return false;
    }
    if (std::isnan(w) && std::isnan(g))
      continue;
    if (std::isinf(w) && g == w)
      continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream s;
      s.precision(9);
      s << "element " << i << ": " << g << " vs expected " << w;
      why = s.str();
      return false;
    }
  }
  return true;
}

/// input_N.pb / output_N.pb; `declared[N]`: the model's dtype for it, where
/// known (bfloat16 test data is stored as UINT16).
std::vector<HostTensor> read_set(const fs::path &dir, const std::string &prefix,
                                 const std::vector<std::optional<DType>> &declared) {
  std::vector<HostTensor> out;
  for (size_t i = 0;; ++i) {
    fs::path p = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p))
      break;
    out.push_back(read_onnx_tensor_file(p.string(), i < declared.size() ? declared[i] : std::nullopt));
  }
  return out;
}

std::string read_bytes(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_error(const DiagnosticEngine &d) {
  for (const Diagnostic &x : d.diagnostics())
    if (x.severity == Severity::error)
      return x.to_text();
  return "failed";
}

ErrorCode first_code(const DiagnosticEngine &d) {
  for (const Diagnostic &x : d.diagnostics())
    if (x.severity == Severity::error)
      return x.code;
  return ErrorCode::Internal;
}

Result run_test(const fs::path &dir, const Options &opt) {
  Result r;
  r.name = dir.filename().string();
  r.category = dir.parent_path().filename().string();
  if (auto it = kStaleExpected.find(r.category + "/" + r.name); it != kStaleExpected.end()) {
    r.reason = it->second;
    r.excluded = "stale test data";
    r.outcome = Outcome::unsupported;
    return r;
  }
  std::string bytes = read_bytes(dir / "model.onnx");
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());

  LoadOptions load;
  OnnxImportInfo info;
  DiagnosticEngine diags;
  LoadedModel model = load_onnx_model(bytes, (dir / "model.onnx").string(), load, diags, {}, &info);
  // Classify by op.
  std::vector<std::string> main_ops;
  for (const std::string &op : info.op_types)
    if (op != "Constant")
      main_ops.push_back(op);
  if (main_ops.empty())
    main_ops = info.op_types;
  r.op = main_ops.empty() ? "?" : main_ops[0];
  if (main_ops.size() > 1 && r.category != "node")
    r.op = "(model)";
  r.in_scope = r.category == "node" && r.name.find("training") == std::string::npos &&
               std::all_of(main_ops.begin(), main_ops.end(), [](const std::string &o) { return kScope.count(o); });
  for (const std::string &op : info.op_types)
    if (auto it = kExcludedOps.find(op); it != kExcludedOps.end())
      r.excluded = it->second;
  if (r.name.find("training") != std::string::npos)
    r.excluded = "training";

  bool pinned = false;
  if (!model.graph && (!info.needs_value.empty() || first_code(diags) == ErrorCode::OnnxNotFoldable))
    pinned = true; // reloaded per data set below
  else if (!model.graph) {
    ErrorCode c = first_code(diags);
    r.reason = first_error(diags);
    if (c == ErrorCode::OnnxUnsupportedType && r.excluded.empty())
      r.excluded = r.reason.find("only tensor") != std::string::npos ? "sequence/optional/string"
                                                                     : "dtype maxc lacks";
    r.outcome = (c == ErrorCode::OnnxUnsupportedOp || c == ErrorCode::OnnxUnsupportedType ||
                 c == ErrorCode::OnnxAttribute || c == ErrorCode::OnnxNotFoldable)
                    ? Outcome::unsupported
                    : Outcome::fail;
    return r;
  }
  if (sets.empty()) {
    r.reason = "no test data";
    r.outcome = Outcome::fail;
    return r;
  }
  for (const fs::path &set : sets) {
    std::vector<HostTensor> all_inputs, expected;
    try {
      std::vector<std::optional<DType>> in_types(info.declared_inputs.size()), out_types;
      if (model.graph) {
        const Graph &g = *model.graph;
        for (size_t i = 0; i < info.declared_inputs.size(); ++i)
          for (size_t j = 0; j < info.input_names.size() && j < g.input_ids().size(); ++j)
            if (info.input_names[j] == info.declared_inputs[i])
              in_types[i] = g.type_of(g.input_ids()[j]).dtype;
        for (ValueId id : g.output_ids())
          out_types.push_back(g.type_of(id).dtype);
      }
      all_inputs = read_set(set, "input", in_types);
      expected = read_set(set, "output", out_types);
    } catch (const Error &e) {
      r.reason = "reading " + set.string() + ": " + e.formatted();
      if (e.code() == ErrorCode::OnnxUnsupportedType && r.excluded.empty())
        r.excluded = "dtype maxc lacks";
      r.outcome = Outcome::unsupported; // e.g. an input of a type maxc lacks
      return r;
    }
    std::map<std::string, HostTensor> by_name;
    for (size_t i = 0; i < info.declared_inputs.size() && i < all_inputs.size(); ++i)
      by_name[info.declared_inputs[i]] = all_inputs[i];
    const Graph *graph = model.graph.get();
    LoadedModel pinned_model;
    OnnxImportInfo pinned_info;
    size_t pins = 0;
    (void)pins;
    std::vector<std::string> bound_by_run; // inputs maxc run binds at import, as --bind
    bool run_as_given = false;
    if (pinned) {
      // As `maxc run model.onnx --input NAME=FILE...` runs it: the data
      // set's values given (bounds of dims read from them), the inputs a
      // node needs at import (axes) bound to them; the rest stay run-time
      // inputs.
      LoadOptions given = load;
      given.input_values = by_name;
      DiagnosticEngine d1;
      pinned_info = OnnxImportInfo{};
      pinned_model = load_onnx_model(bytes, (dir / "model.onnx").string(), given, d1, {}, &pinned_info);
      if (pinned_model.graph) {
        run_as_given = r.run_as_given = true;
        bound_by_run = pinned_model.bound_from_values;
        r.bound_by_run.clear();
        for (const std::string &n : bound_by_run)
          r.bound_by_run += (r.bound_by_run.empty() ? "" : ",") + n;
        graph = pinned_model.graph.get();
      }
    }
    if (pinned && !run_as_given) {
      // Pin the inputs the importer needs the values of, until it needs no more.
      OnnxImportOptions o;
      std::vector<std::string> needed = info.needs_value;
      bool added_scalars = false;
      for (int round = 0; round < 8; ++round) {
        bool added = false;
        for (const std::string &n : needed)
          if (by_name.count(n) && !o.pinned_inputs.count(n)) {
            o.pinned_inputs[n] = by_name[n];
            added = true;
          }
        DiagnosticEngine d2;
        pinned_info = OnnxImportInfo{};
        pinned_model = load_onnx_model(bytes, (dir / "model.onnx").string(), load, d2, o, &pinned_info);
        if (pinned_model.graph)
          break;
        needed = pinned_info.needs_value;
        if (needed.empty() && !added_scalars) {
          // A value computed from inputs (Range(0, Cast(size))): pin the small integer inputs.
          added_scalars = true;
          for (const auto &[n, t] : by_name)
            if (t.rank() <= 1 && t.numel() <= 16 && is_integer(t.dtype()))
              needed.push_back(n);
          added = true;
        }
        if (!added || needed.empty() || round == 7) {
          r.reason = first_error(d2);
          r.outcome = Outcome::unsupported;
          return r;
        }
      }
      graph = pinned_model.graph.get();
      pins = o.pinned_inputs.size();
    }
    const OnnxImportInfo &used = pinned ? pinned_info : info;
    std::vector<HostTensor> inputs;
    for (const std::string &n : used.input_names)
      inputs.push_back(by_name.at(n));
    // Test data that disagrees with its own model's static input shapes
    // (CastLike's `like` given as [1] for a declared [3, 4]) tests nothing.
    for (size_t i = 0; i < inputs.size() && i < graph->input_ids().size(); ++i) {
      const Shape &want = graph->type_of(graph->input_ids()[i]).shape;
      bool differs = static_cast<int64_t>(want.size()) != inputs[i].rank();
      for (size_t d = 0; !differs && d < want.size(); ++d)
        differs = want[d].is_static() && want[d].value() != inputs[i].shape()[d];
      if (differs) {
        r.reason = "test data for input '" + used.input_names[i] + "' has another shape than the model declares (" +
                   graph->type_of(graph->input_ids()[i]).to_string() + ")";
        r.excluded = "stale test data";
        r.outcome = Outcome::unsupported;
        return r;
      }
    }
    struct Path {
      const char *name;
      bool on;
      std::vector<HostTensor> (*run)(const Graph &, const std::vector<HostTensor> &);
    };
    Path paths[] = {
        {"ref", opt.ref, [](const Graph &g, const std::vector<HostTensor> &in) { return Interpreter::run(g, in); }},
        {"cpu", opt.cpu,
         [](const Graph &g, const std::vector<HostTensor> &in) { return run_compiled_on_host(g, in, {}, 1); }},
        {"emu", opt.emu,
         [](const Graph &g, const std::vector<HostTensor> &in) { return run_gpu_emulated(g, in, {}, 1); }},
    };
    for (const Path &p : paths) {
      if (!p.on)
        continue;
      std::vector<HostTensor> got;
      try {
        got = p.run(*graph, inputs);
      } catch (const std::exception &e) {
        const auto *err = dynamic_cast<const Error *>(&e);
        r.reason = std::string(p.name) + ": " + (err ? err->formatted() : std::string(e.what()));
        r.outcome = Outcome::fail;
        return r;
      }
      if (got.size() != expected.size()) {
        r.reason = std::string(p.name) + ": " + std::to_string(got.size()) + " outputs, expected " +
                   std::to_string(expected.size());
        r.outcome = Outcome::fail;
        return r;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        std::string why;
        if (!close_enough(got[i], expected[i], 1e-3, 1e-7, why)) {
          r.reason = std::string(p.name) + ": output " + std::to_string(i) + ": " + why;
          r.outcome = Outcome::fail;
          return r;
        }
      }
    }
  }
  r.outcome = Outcome::pass;
  if (pinned && !r.bound_by_run.empty())
    r.reason = "run-time inputs; bound at import as maxc run does (--bind): " + r.bound_by_run;
  else if (pinned && r.run_as_given)
    r.reason = "run-time inputs";
  else if (pinned)
    r.reason = "pinned inputs: " + [&] {
      std::string s;
      for (const std::string &n : info.needs_value)
        s += (s.empty() ? "" : ",") + n;
      return s;
    }();
  return r;
}

std::set<std::string> read_list(const std::string &path) {
  std::set<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#')
      out.insert(line);
  return out;
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--paths") {
      std::string p = next();
      opt.ref = p.find("ref") != std::string::npos;
      opt.cpu = p.find("cpu") != std::string::npos;
      opt.emu = p.find("emu") != std::string::npos;
    } else if (a == "--table") {
      opt.table = next();
    } else if (a == "--expect") {
      opt.expect = next();
    } else if (a == "--list-passing") {
      opt.list_passing = next();
    } else if (a == "-v") {
      opt.verbose = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: maxc-onnx-conformance [--paths ref,cpu,emu] [--expect LIST] [--table FILE]\n"
                   "                             [--list-passing FILE] [-v] DIR...\n"
                   "  DIR: an ONNX backend test (with model.onnx) or a folder of them\n"
                   "  (Debian's libonnx-testdata: /usr/share/libonnx-testdata/data/node ...)\n";
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "maxc-onnx-conformance: unknown option '" << a << "' (--help lists them)\n";
      return 2;
    } else {
      opt.dirs.push_back(a);
    }
  }
  std::set<std::string> only;
  if (!opt.expect.empty())
    only = read_list(opt.expect);
  std::vector<fs::path> tests;
  for (const std::string &d : opt.dirs) {
    if (!fs::is_directory(d)) {
      std::cerr << "maxc-onnx-conformance: " << d << ": not a directory\n";
      return 2;
    }
    if (fs::exists(fs::path(d) / "model.onnx")) {
      tests.push_back(d);
      continue;
    }
    for (const auto &e : fs::directory_iterator(d))
      if (fs::exists(e.path() / "model.onnx"))
        tests.push_back(e.path());
  }
  std::sort(tests.begin(), tests.end());
  auto start = std::chrono::steady_clock::now();
  std::vector<Result> results;
  for (const fs::path &t : tests) {
    std::string id = t.parent_path().filename().string() + "/" + t.filename().string();
    if (!only.empty() && !only.count(id))
      continue;
    Result r;
    try {
      r = run_test(t, opt);
    } catch (const std::exception &e) {
      r.name = t.filename().string();
      r.category = t.parent_path().filename().string();
      r.outcome = Outcome::fail;
      r.reason = std::string("exception: ") + e.what();
    }
    if (opt.verbose || (!only.empty() && r.outcome != Outcome::pass))
      std::cout << (r.outcome == Outcome::pass ? "PASS " : r.outcome == Outcome::fail ? "FAIL " : "UNSUPPORTED ")
                << r.category << "/" << r.name << " [" << r.op << "]" << (r.reason.empty() ? "" : " " + r.reason)
                << "\n"
                << std::flush;
    results.push_back(r);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Summary and the per-op table.
  struct Row {
    int pass = 0, fail = 0, unsupported = 0;
  };
  std::map<std::string, std::map<std::string, Row>> by_cat_op;
  Row total, scope;
  std::map<std::string, Row> by_category;
  std::map<std::string, int> excluded;
  for (const Result &r : results) {
    Row *rows[] = {&by_cat_op[r.category][r.op], &total, &by_category[r.category]};
    for (Row *row : rows)
      (r.outcome == Outcome::pass ? row->pass : r.outcome == Outcome::fail ? row->fail : row->unsupported)++;
    if (r.in_scope && r.excluded.empty())
      (r.outcome == Outcome::pass ? scope.pass : r.outcome == Outcome::fail ? scope.fail : scope.unsupported)++;
    if (!r.excluded.empty())
      excluded[r.excluded]++;
  }
  std::ostringstream table;
  std::string paths = std::string(opt.ref ? "ref " : "") + (opt.cpu ? "cpu " : "") + (opt.emu ? "emu" : "");
  table << "Paths: " << paths << "; rtol 1e-3, atol 1e-7; " << results.size() << " tests in " << std::fixed;
  table.precision(1);
  table << seconds << " s.\n\n";
  table << "| category | passed | failed | unsupported |\n|---|---|---|---|\n";
  for (const auto &[cat, row] : by_category)
    table << "| " << cat << " | " << row.pass << " | " << row.fail << " | " << row.unsupported << " |\n";
  table << "| **all** | " << total.pass << " | " << total.fail << " | " << total.unsupported << " |\n\n";
  int scope_n = scope.pass + scope.fail + scope.unsupported;
  table << "In scope (node tests of the ops issue #10 lists, inference only): " << scope.pass << " / " << scope_n
        << " pass";
  if (scope_n)
    table << " (" << std::setprecision(1) << 100.0 * scope.pass / scope_n << " %)";
  table << ".\n\nExcluded categories (tests):";
  for (const auto &[cat, n] : excluded)
    table << " " << cat << " " << n << ";";
  table << "\n\n| category | op | passed | failed | unsupported |\n|---|---|---|---|---|\n";
  for (const auto &[cat, ops] : by_cat_op)
    for (const auto &[op, row] : ops)
      table << "| " << cat << " | " << op << " | " << row.pass << " | " << row.fail << " | " << row.unsupported
            << " |\n";
  table << "\n### Not passing\n\n";
  for (const Result &r : results)
    if (r.outcome != Outcome::pass) {
      std::string reason = r.reason;
      if (size_t p = reason.find("/usr/share/libonnx-testdata/data/"); p != std::string::npos)
        reason.erase(p, std::string("/usr/share/libonnx-testdata/data/").size());
      std::replace(reason.begin(), reason.end(), '|', '/');
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      table << "- " << (r.outcome == Outcome::fail ? "FAIL" : "unsupported") << " `" << r.category << "/" << r.name
            << "`" << (r.excluded.empty() ? "" : " (" + r.excluded + ")") << (r.in_scope ? " [in scope]" : "")
            << ": " << reason << "\n";
    }
  if (!opt.table.empty()) {
    std::ofstream(opt.table) << table.str();
  }
  std::cout << "onnx-conformance: " << total.pass << " passed, " << total.fail << " failed, " << total.unsupported
            << " unsupported of " << results.size() << " (" << paths << ") in " << std::fixed << std::setprecision(1) << seconds
            << " s; in scope " << scope.pass << "/" << scope_n << "\n";
  if (!opt.list_passing.empty()) {
    std::ofstream out(opt.list_passing);
    out << "# ONNX conformance tests that pass on every path (scripts/onnx-conformance --update)\n";
    for (const Result &r : results)
      if (r.outcome == Outcome::pass)
        out << r.category << "/" << r.name << "\n";
  }
  if (!only.empty()) {
    int missing = 0;
    std::set<std::string> seen;
    for (const Result &r : results)
      seen.insert(r.category + "/" + r.name);
    for (const std::string &id : only)
      if (!seen.count(id)) {
        std::cout << "MISSING " << id << "\n";
        ++missing;
      }
    return total.fail + total.unsupported + missing == 0 ? 0 : 1;
  }
  return 0;
}
