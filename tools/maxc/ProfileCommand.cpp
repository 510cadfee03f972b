// maxc profile: compile a model with per-kernel counters (a profile build,
// Codegen/Profile.h), run it here and print where the time went: one row
// per kernel, most time first, with the model nodes each kernel computes
// (docs/profiling.md).
#include "Diagnose.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Npy.h"
#include "maxc/Support/Float16.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace maxc::cli {

namespace {

/// Deterministic inputs where none is given, as the generated harnesses
/// make them (xorshift64*): floats uniform in [-1, 1), integers 0 (always a
/// valid index), bools 0 or 1.
HostTensor random_input(const TensorType &type, const DimBindings &dims, uint64_t &state) {
  HostTensor t(type.dtype, evaluate_shape(type.shape, dims));
  for (int64_t i = 0; i < t.numel(); ++i) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    double u = 2 * (static_cast<double>((state * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0)) - 1;
    switch (type.dtype) {
    case DType::f32: t.data_as<float>()[i] = static_cast<float>(u); break;
    case DType::f64: t.data_as<double>()[i] = u; break;
    case DType::f16: t.data_as<uint16_t>()[i] = float_to_half_bits(static_cast<float>(u)); break;
    case DType::bf16: t.data_as<uint16_t>()[i] = float_to_bfloat16_bits(static_cast<float>(u)); break;
    case DType::boolean: t.data_as<uint8_t>()[i] = u < 0; break;
    default: break; // integers stay 0
    }
  }
  return t;
}

std::string format(const char *fmt, double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, x);
  return buffer;
}

/// Calls per run: a whole number unless the runs differed.
std::string per_run(int64_t calls, int64_t runs) {
  if (runs > 0 && calls % runs == 0)
    return std::to_string(calls / runs);
  return format("%.2f", runs > 0 ? static_cast<double>(calls) / static_cast<double>(runs) : 0.0);
}

std::string threads_text(int64_t threads) { return threads < 0 ? "ext" : std::to_string(threads); }

} // namespace

int run_profile(const GlobalOptions &global, const ProfileOptions &options) {
  DiagnosticEngine diagnostics;
  if (options.threads < 1)
    diagnostics.error(ErrorCode::InvalidArgument, "", "--threads", "--threads takes a count >= 1");
  if (options.runs < 1)
    diagnostics.error(ErrorCode::InvalidArgument, "", "--runs", "--runs takes a count >= 1");
  if (options.warmup < 0)
    diagnostics.error(ErrorCode::InvalidArgument, "", "--warmup", "--warmup takes a count >= 0");
  if (options.top < 0)
    diagnostics.error(ErrorCode::InvalidArgument, "", "--top", "--top takes a count >= 0 (0: every kernel)");
  DimBindings dims; // --dim values of dims no input determines (load_model_to_run)
  std::map<std::string, std::string> input_files = parse_input_files(options.inputs, diagnostics);
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  LoadedModel model = load_model_to_run(global, options.model, options.weights, dims, diagnostics);
  if (!model.graph)
    return finish(global, diagnostics);
  const Graph &graph = *model.graph;
  use_graph_input_names(input_files, model);
  // Inputs: the files given, then random ones (their symbolic dims bound
  // by the files or by --dim).
  std::vector<HostTensor> inputs(graph.input_ids().size());
  std::vector<bool> given(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string &name = graph.value_info(graph.input_ids()[i]).name;
    auto it = input_files.find(name);
    if (it == input_files.end())
      continue;
    try {
      inputs[i] = read_npy(it->second);
      given[i] = true;
    } catch (const Error &e) {
      diagnostics.error(e, it->second, "");
    }
    input_files.erase(it);
  }
  for (const auto &[name, file] : input_files)
    diagnostics.error(ErrorCode::InputMismatch, "", "--input", "model '" + graph.name() + "' has no input named '" + name + "'");
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  const bool progress = !global.quiet && ::isatty(2) != 0;
  driver::HostProfile profile;
  try {
    std::vector<HostTensor> known;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (given[i])
        known.push_back(inputs[i]);
    // Dims bound by the given inputs (bind_input_dims reads them in input order).
    DimBindings bound = dims;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (given[i]) {
        const Shape &shape = graph.type_of(graph.input_ids()[i]).shape;
        for (size_t d = 0; d < shape.size() && d < inputs[i].shape().size(); ++d)
          if (shape[d].is_symbol())
            bound.emplace(shape[d].symbol(), inputs[i].shape()[d]);
      }
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!given[i]) {
        const TensorType &type = graph.type_of(graph.input_ids()[i]);
        for (const Dim &d : type.shape)
          if (!d.is_static())
            for (const std::string &s : d.symbols())
              if (!bound.count(s))
                throw Error(ErrorCode::UnboundDim, "symbolic dim '" + s + "' of input '" +
                                                       graph.value_info(graph.input_ids()[i]).name +
                                                       "' has no value; pass --dim " + s + "=N or --input");
        inputs[i] = random_input(type, bound, state);
      }
    if (progress)
      std::fprintf(stderr, "\r\033[Kmaxc: compiling and running %s", options.model.c_str());
    profile = driver::profile_on_host(graph, inputs, dims, options.threads, options.runs, options.warmup);
    if (progress)
      std::fprintf(stderr, "\r\033[K");
  } catch (const Error &e) {
    if (progress)
      std::fprintf(stderr, "\r\033[K");
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }

  // Kernels that ran, most time first (then in counter order).
  std::vector<size_t> order;
  int64_t total_ns = 0;
  for (size_t k = 0; k < profile.kernels.size(); ++k)
    if (profile.counters[k].calls > 0) {
      order.push_back(k);
      total_ns += profile.counters[k].ns;
    }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return profile.counters[a].ns > profile.counters[b].ns; });
  const double runs = static_cast<double>(profile.runs);
  auto ms = [&](int64_t ns) { return static_cast<double>(ns) / runs / 1e6; };
  auto share = [&](int64_t ns) { return total_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(total_ns) : 0.0; };
  // --top K (0: all); by default the table shows 20, the JSON all.
  const size_t limit = options.top_given ? static_cast<size_t>(options.top) : options.json ? 0 : 20;
  const size_t shown = limit == 0 ? order.size() : std::min(order.size(), limit);

  // The cliff check's loops with the time of the kernel that computes their
  // node (-1: none ran), most first.
  std::vector<std::pair<int64_t, const ScalarStridedLoop *>> loops_by_time;
  for (const ScalarStridedLoop &l : profile.scalar_loops) {
    int64_t ns = -1;
    for (size_t k : order)
      if (std::find(profile.kernels[k].nodes.begin(), profile.kernels[k].nodes.end(), l.node) !=
          profile.kernels[k].nodes.end())
        ns = std::max(ns, profile.counters[k].ns);
    loops_by_time.emplace_back(ns, &l);
  }
  std::stable_sort(loops_by_time.begin(), loops_by_time.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });

  if (options.json) {
    using ojson = nlohmann::ordered_json;
    ojson kernels = ojson::array();
    for (size_t i = 0; i < shown; ++i) {
      size_t k = order[i];
      const ProfiledKernel &pk = profile.kernels[k];
      const KernelCounter &c = profile.counters[k];
      kernels.push_back({{"rank", i + 1},
                         {"index", k},
                         {"kernel", pk.label()},
                         {"op", pk.op},
                         {"ops", pk.ops},
                         {"graph", pk.graph_name},
                         {"ms", ms(c.ns)},
                         {"share", share(c.ns) / 100.0},
                         {"calls", static_cast<double>(c.calls) / runs},
                         {"threads", c.threads},
                         {"nodes", pk.nodes}});
    }
    ojson out{{"model", options.model},
              {"name", graph.name()},
              {"threads", profile.threads},
              {"runs", profile.runs},
              {"warmup", options.warmup},
              {"run_ms", profile.run_ms},
              {"kernel_ms", ms(total_ns)},
              {"kernels_run", order.size()},
              {"kernels", kernels}};
    ojson loops = ojson::array();
    for (const auto &[ns, l] : loops_by_time)
      loops.push_back({{"node", l->node},
                       {"function", l->function},
                       {"stride_bytes", l->stride_bytes},
                       {"access", l->store ? "store" : "load"},
                       {"vectorizer_declined", l->declined},
                       {"kernel_ms", ns < 0 ? ojson(nullptr) : ojson(ms(ns))}});
    out["scalar_strided_loops"] = loops;
    std::cout << out.dump(2) << "\n";
    return finish(global, diagnostics);
  }

  // The table: columns sized to their contents.
  struct Row {
    std::string rank, ms, share, calls, threads, kernel, graph, nodes;
  };
  std::vector<Row> rows = {{"rank", "ms/run", "share", "calls", "threads", "kernel", "graph", "nodes"}};
  for (size_t i = 0; i < shown; ++i) {
    size_t k = order[i];
    const ProfiledKernel &pk = profile.kernels[k];
    const KernelCounter &c = profile.counters[k];
    rows.push_back({std::to_string(i + 1), format("%.3f", ms(c.ns)), format("%.1f%%", share(c.ns)),
                    per_run(c.calls, profile.runs), threads_text(c.threads), pk.label(), pk.graph_name,
                    pk.nodes.empty() ? "-" : pk.nodes_summary()});
  }
  size_t w[7] = {0, 0, 0, 0, 0, 0, 0};
  for (const Row &r : rows) {
    const std::string *f[7] = {&r.rank, &r.ms, &r.share, &r.calls, &r.threads, &r.kernel, &r.graph};
    for (int j = 0; j < 7; ++j)
      w[j] = std::max(w[j], f[j]->size());
  }
  std::cout << "maxc profile: " << options.model << " (" << graph.name() << "), " << profile.threads
            << (profile.threads == 1 ? " thread, " : " threads, ") << profile.runs << " runs after "
            << options.warmup << " warmup\n";
  std::cout << "  " << format("%.3f", profile.run_ms) << " ms per run; kernels " << format("%.3f", ms(total_ns))
            << " ms (" << order.size() << " kernels ran";
  if (shown < order.size())
    std::cout << ", top " << shown << " shown";
  std::cout << ")\n\n";
  for (const Row &r : rows) {
    auto right = [](const std::string &s, size_t width) { return std::string(width - s.size(), ' ') + s; };
    auto left = [](const std::string &s, size_t width) { return s + std::string(width - s.size(), ' '); };
    std::cout << right(r.rank, w[0]) << "  " << right(r.ms, w[1]) << "  " << right(r.share, w[2]) << "  "
              << right(r.calls, w[3]) << "  " << right(r.threads, w[4]) << "  " << left(r.kernel, w[5]) << "  "
              << left(r.graph, w[6]) << "  " << r.nodes << "\n";
  }
  if (shown < order.size()) {
    int64_t rest = 0;
    for (size_t i = shown; i < order.size(); ++i)
      rest += profile.counters[order[i]].ns;
    std::cout << "  ... " << order.size() - shown << " more kernels: " << format("%.3f", ms(rest)) << " ms ("
              << format("%.1f%%", share(rest)) << ")\n";
  }
  // The cliff check: loops the vectorizer left scalar while they step
  // through memory by more than a cache line per element.
  if (!profile.scalar_loops.empty()) {
    std::cout << "\n" << profile.scalar_loops.size()
              << " scalar loop(s): one element at a time, declined by the vectorizer or striding past a cache line, "
                 "by their kernel's time:\n";
    for (const auto &[ns, l] : loops_by_time)
      std::cout << "  " << (ns < 0 ? std::string("     -") : format("%6.3f", ms(ns))) << " ms  node " << l->node
                << " (" << l->function << "): " << (l->declined ? "not vectorized; " : "")
                << (l->stride_bytes > 0 ? std::string(l->store ? "a store" : "a load") + " steps " +
                                              std::to_string(l->stride_bytes) + " bytes per iteration"
                                        : std::string("no constant stride"))
                << "\n";
  }
  return finish(global, diagnostics);
}

} // namespace maxc::cli
