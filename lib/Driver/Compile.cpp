// The compile pipeline, after Halide's lower_impl: one ordered list of
// named steps, each run once per compile and timed (maxc compile
// --time-passes prints them all, whatever the backend):
//
//   validate   options, --emit kinds, the backend's own checks, the output directories
//   load       parse and trace the model (Frontend)
//   canonicalize  exporters' spellings to canonical forms: pow(x, 2) → x·x, ...
//              (Transforms/Canonicalize.h, patterns on the rewrite driver)
//   decompose  composite ops to primitives (Transforms)
//   plan       interface, kernels, workspace bound (Codegen/LoweringPlan)
//   backend    the backend's code generation (its own sub-steps are timed too);
//              the weights, which do not depend on the code, are written to
//              their temp file meanwhile on a second thread (EarlyWrites:
//              sub-steps "weights (overlapped)" and "wait for weights")
//   artifacts  graph, manifest and depfile beside the backend's artifacts
//   write      the rest of every output to a temp, then all renamed (ArtifactWriter)
#include "maxc/Driver/Compile.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/Manifest.h"
#include "maxc/Driver/ArtifactWriter.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/Support/Async.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Decompose.h"
#include "maxc/Transforms/Shard.h"

#include <algorithm>
#include <future>
#include <map>
#include <memory>

namespace maxc::driver {

namespace {

std::string directory_of(const std::string &path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// Where an artifact of `kind` goes: the object at OUT, the rest beside it.
std::string artifact_path(const std::string &kind, const std::string &object_path, const std::string &stem) {
  static const std::map<std::string, std::string> suffixes = {
      {"header", ".h"},        {"manifest", ".manifest.json"}, {"asm", ".s"},
      {"llvm-ir", ".ll"},      {"graph", ".graph.json"},       {"weights", ".weights.bin"},
      {"test-harness", "_test.c"}, {"bench-harness", "_bench.c"}};
  if (kind == "obj")
    return object_path;
  if (auto it = suffixes.find(kind); it != suffixes.end())
    return stem + it->second;
  auto dot = kind.find('.'); // hsaco.gfx90a, gpu-asm.gfx90a, ptx.sm_80, cubin.sm_80
  std::string family = kind.substr(0, dot), arch = dot == std::string::npos ? "" : kind.substr(dot + 1);
  return stem + "." + arch + (family == "gpu-asm" ? ".s" : "." + family);
}

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? ", " : "") + items[i];
  return out;
}

/// The state the steps pass along.
struct Compilation {
  Compilation(const CompileRequest &r, DiagnosticEngine &d, CompileResult &out)
      : request(r), diagnostics(d), result(out) {}
  const CompileRequest &request;
  DiagnosticEngine &diagnostics;
  CompileResult &result;
  const Backend *backend = nullptr;
  std::set<std::string> emit;
  LoadedModel model;
  std::string name, stem;
  std::vector<std::string> kinds; // artifact kinds written, in order
  PlannedModel planned;
  BackendOutput output;
  std::vector<std::pair<std::string, ByteChunks>> contents; // kind, bytes (all but the manifest)
  std::map<std::string, std::string> paths;                 // kind -> output path
  std::unique_ptr<ArtifactWriter> writer;                   // made by load (early writes), committed by write
  /// The manifest's digests of the files read ({sha256, size} each), taken
  /// on a second thread from load on (joined at the latest on destruction).
  std::future<std::vector<std::pair<std::string, uint64_t>>> input_digests;
};

/// The backend's early writes (EarlyWrites), through the compile's writer.
/// A write that cannot start (the path is refused, no temp file) is not
/// started: the write step then reports the error as it always did.
class DriverEarlyWrites : public EarlyWrites {
public:
  explicit DriverEarlyWrites(Compilation &c) : c_(c) {}
  std::unique_ptr<EarlyWrite> start(const std::string &kind, const ByteChunks &head, Visitor visit) override {
    auto path = c_.paths.find(kind);
    if (!c_.writer || path == c_.paths.end())
      return nullptr;
    try {
      c_.writer->start(kind, path->second, head, std::move(visit));
    } catch (const Error &) {
      return nullptr;
    }
    return std::make_unique<Handle>(*c_.writer, kind, c_.result.timer);
  }

private:
  /// Not waited for (the backend failed): the write is cancelled and its
  /// thread joined ("weights (cancelled)" in --time-passes); the temp goes
  /// with the writer.
  struct Handle : EarlyWrite {
    Handle(ArtifactWriter &w, std::string k, PassTimer &t) : writer(w), kind(std::move(k)), timer(t) {}
    ~Handle() override {
      if (!waited)
        timer.run("weights (cancelled)", [&] { writer.cancel(kind); });
    }
    double wait() override {
      waited = true;
      return writer.wait(kind);
    }
    ArtifactWriter &writer;
    std::string kind;
    PassTimer &timer;
    bool waited = false;
  };
  Compilation &c_;
};

// --- the steps ------------------------------------------------------------

/// Interfaces, kernel counts and the workspace bound of a decomposed model.
void plan(PlannedModel &p, const std::string &name, const PlanOptions &options) {
  p.interface = describe_interface(*p.source, name);
  p.abi = describe_interface(*p.lowered, name);
  p.plans = plan_lowering_all(*p.lowered, options);
  p.kernels.push_back("main: " + std::to_string(p.plans.at(p.lowered.get()).kernels.size()) + " kernels");
  for (const auto &[sub_name, sub] : p.lowered->subgraphs())
    p.kernels.push_back("sub." + sub_name + ": " + std::to_string(p.plans.at(sub.get()).kernels.size()) + " kernels");
  p.workspace_bound = workspace_bound(*p.lowered, &p.plans);
  p.interface.workspace_bound = p.abi.workspace_bound = p.workspace_bound;
}

/// Which rank's program this is (ModelInterface::rank), for the manifest.
void set_rank(PlannedModel &p, int rank) {
  if (p.abi.world > 0)
    p.interface.rank = p.abi.rank = rank;
}

/// Headers and manifests name each input/output as the source model did
/// (ONNX "input.1", "/logits") next to its C name.
void use_source_names(PlannedModel &p, const std::map<std::string, std::string> &source_names) {
  for (ModelInterface *m : {&p.interface, &p.abi})
    for (auto *list : {&m->inputs, &m->outputs})
      for (ModelInterface::Tensor &t : *list)
        if (auto it = source_names.find(t.source_name); it != source_names.end())
          t.source_name = it->second;
}

void validate(Compilation &c) {
  const CompileRequest &r = c.request;
  c.backend = find_backend(r.backend);
  if (!c.backend) {
    c.diagnostics.error(ErrorCode::InvalidArgument, "", "--backend",
                        "unknown backend '" + r.backend + "' (expected " + backend_names() + ")");
    return;
  }
  std::vector<std::string> accepted = c.backend->emit_kinds();
  accepted.insert(accepted.begin() + std::min<size_t>(2, accepted.size()), "manifest");
  accepted.push_back("graph");
  c.emit.insert(r.emit.begin(), r.emit.end());
  if (c.emit.empty())
    c.emit = {"obj", "header", "manifest"};
  std::string with = r.backend == "cpu" ? "" : " with the " + r.backend + " backend";
  for (const std::string &e : c.emit)
    if (std::find(accepted.begin(), accepted.end(), e) == accepted.end())
      c.diagnostics.error(ErrorCode::InvalidArgument, "", "--emit",
                          "unknown artifact '" + e + "'" + with + " (expected " + join(accepted) + ")");
  if (r.threads != 1)
    c.diagnostics.error(ErrorCode::InvalidArgument, "", "--threads",
                        "threads are chosen at run time (NAME_set_num_threads or NAME_set_parallel_for in the CPU header; the GPU runs "
                        "its own); use --threads 1");
  if (r.options.opt_level < 0 || r.options.opt_level > 3)
    c.diagnostics.error(ErrorCode::InvalidArgument, "", "-O", "optimization level must be 0 to 3");
  if (!r.name.empty() && !is_c_identifier(r.name))
    c.diagnostics.error(ErrorCode::InvalidArgument, "", "--name", "'" + r.name + "' is not a C identifier");
  if (r.output_given && r.output.empty())
    c.diagnostics.error(ErrorCode::InvalidArgument, "", "-o", "the output path is empty");
  if (r.options.opt_level >= 0 && r.options.opt_level <= 3)
    try {
      c.backend->validate(r.options);
    } catch (const Error &e) {
      c.diagnostics.error(e, "", "");
    }
  // The directories the outputs go to (every artifact beside the object,
  // the depfile where asked), checked before any work: the write step would
  // fail the same way after the whole backend.
  if (!r.print_outputs && !(r.output_given && r.output.empty()))
    for (const std::string *path : {&r.output, &r.depfile_path})
      if (path == &r.output || !path->empty())
        try {
          ArtifactWriter::check_directory(path->empty() ? "x.o" : *path);
        } catch (const Error &e) {
          c.diagnostics.error(e, "", "");
        }
}

} // namespace

void quantize_loaded_weights(LoadedModel &model, const std::string &kind, const std::string &file,
                             DiagnosticEngine &diagnostics, std::vector<QuantizedLayer> &layers) {
  if (kind.empty() || !model.graph)
    return;
  try {
    QuantizeWeightsOptions q;
    q.bits = quantize_weights_bits(kind);
    if (std::unique_ptr<Graph> g = quantize_weights(*model.graph, q, &layers))
      model.graph = std::move(g);
  } catch (const Error &e) {
    diagnostics.error(e.code(), file, "--quantize-weights", e.message());
    model.graph.reset();
  }
}

namespace {

void load(Compilation &c) {
  LoadOptions options;
  options.weights_path = c.request.weights;
  options.dims = c.request.dims;
  options.bound_inputs = c.request.bound_inputs;
  options.max_dims = c.request.max_dims;
  options.state = c.request.state;
  options.dedup = c.request.dedup;
  options.fuse_qdq = c.request.fuse_qdq;
  c.model = load_model(c.request.model, options, c.diagnostics);
  quantize_loaded_weights(c.model, c.request.quantize_weights, c.request.model, c.diagnostics, c.result.quantized);
  if (!c.model.graph)
    return;
  c.name = c.request.name.empty() ? c.model.graph->name() : c.request.name;
  if (c.request.tensor_parallel > 1) { // one rank's program, named after its rank (docs/tensor-parallel.md)
    if (c.request.backend != "cpu") {
      c.diagnostics.error(ErrorCode::InvalidArgument, "", "--tensor-parallel",
                          "tensor-parallel programs compile for the CPU only so far (docs/tensor-parallel.md)");
      return;
    }
    c.model.graph = shard_graph(*c.model.graph,
                                ShardOptions{c.request.tensor_parallel, c.request.rank, c.request.shard_replicated});
    if (c.request.name.empty())
      c.name += "_rank" + std::to_string(c.request.rank);
  }
  if (!is_c_identifier(c.name)) {
    c.diagnostics.error(ErrorCode::InvalidArgument, c.request.model, "",
                        "model name '" + c.name + "' is not a C identifier (use --name)");
    return;
  }
  c.result.object_path = c.request.output_given ? c.request.output : c.name + ".o";
  c.stem = directory_of(c.result.object_path) + c.name;
  c.kinds = c.backend->artifact_kinds(c.emit, c.request.options);
  for (const std::string &kind : c.kinds)
    c.result.outputs.emplace_back(kind, artifact_path(kind, c.result.object_path, c.stem));
  if (c.request.depfile || !c.request.depfile_path.empty())
    c.result.outputs.emplace_back("depfile", c.request.depfile_path.empty() ? c.result.object_path + ".d"
                                                                            : c.request.depfile_path);
  c.paths.insert(c.result.outputs.begin(), c.result.outputs.end());
  c.writer = std::make_unique<ArtifactWriter>();
  for (const std::string &f : c.model.files_read)
    c.writer->add_input(f);
  c.writer->add_input(c.request.model);
  if (c.emit.count("manifest") && !c.request.print_outputs) {
    auto digests = [files = c.model.files_read] {
      std::vector<std::pair<std::string, uint64_t>> out;
      for (const std::string &f : files) {
        uint64_t size = 0;
        std::string digest = sha256_file_hex(f, &size); // streamed, not read whole
        out.emplace_back(std::move(digest), size);
      }
      return out;
    };
    c.input_digests = async_background(digests); // no thread to be had: hashed when the manifest is made
  }
}

void run_backend(Compilation &c) {
  DriverEarlyWrites early(c);
  BackendOptions options = c.request.options;
  options.early_writes = &early;
  c.output = c.backend->compile(c.planned, options, c.emit, c.result.timer);
  c.result.summary = c.output.summary;
}

void verify_reproducible(Compilation &c) {
  PassTimer again_timer;
  BackendOutput again = c.backend->compile(c.planned, c.request.options, c.emit, again_timer);
  if (again.artifacts != c.output.artifacts)
    c.diagnostics.error(ErrorCode::Internal, c.request.model, "",
                        "two compiles with the same inputs produced different artifacts");
}

void artifacts(Compilation &c) {
  std::map<std::string, ByteChunks> by_kind(c.output.artifacts.begin(), c.output.artifacts.end());
  if (c.emit.count("graph"))
    by_kind["graph"] = graph_to_json(*c.model.graph, GraphJsonOptions{false, 2, nullptr});
  for (const std::string &kind : c.kinds)
    if (kind != "manifest")
      c.contents.emplace_back(kind, std::move(by_kind[kind]));
  if (std::any_of(c.result.outputs.begin(), c.result.outputs.end(), [](const auto &o) { return o.first == "depfile"; }))
    c.contents.emplace_back("depfile", depfile_text(c.result.object_path, c.model.files_read));
}

/// The manifest, from the hashes the writer computed while writing the
/// other artifacts (nothing written is read back).
std::string manifest(Compilation &c, const ArtifactWriter &writer) {
  ManifestInputs info;
  info.section = c.output.manifest;
  info.workspace_bytes = c.planned.workspace_bound.to_string();
  info.kernels = c.planned.kernels;
  std::vector<std::pair<std::string, uint64_t>> digests = c.input_digests.get();
  for (size_t i = 0; i < c.model.files_read.size(); ++i)
    info.inputs.push_back({i == 0 ? "model" : "weights", base_name(c.model.files_read[i]), digests[i].first,
                           digests[i].second});
  std::vector<const ArtifactWriter::Output *> written;
  for (const ArtifactWriter::Output &o : writer.outputs())
    if (o.kind != "depfile")
      written.push_back(&o);
  std::sort(written.begin(), written.end(), [](auto *a, auto *b) { return a->kind < b->kind; });
  for (const ArtifactWriter::Output *o : written)
    info.outputs.push_back({o->kind, base_name(o->path), o->sha256, o->size});
  if (c.request.manifest_timings)
    info.stage_ms = c.result.timer.passes();
  ModelInterface interface = c.planned.interface;
  interface.profile = c.request.options.profile;
  if (c.request.options.external_weights) {
    interface.external_weights = true;
    interface.weights_blob_bytes = c.output.weights_blob_bytes;
    interface.weights_blob_checksum = c.output.weights_blob_checksum;
  }
  return emit_manifest(interface, info);
}

void write(Compilation &c) {
  ArtifactWriter &writer = *c.writer;
  for (auto &[kind, bytes] : c.contents)
    writer.add(kind, c.paths[kind], std::move(bytes));
  if (c.emit.count("manifest")) {
    writer.stage();
    writer.add("manifest", c.paths["manifest"], manifest(c, writer));
  }
  writer.commit();
}

} // namespace

PlannedModel plan_model(const Graph &graph, const std::string &name, const DecomposeOptions &options,
                        const PlanOptions &plan_options) {
  PlannedModel p;
  p.source = &graph;
  p.canonical = canonicalize(graph);
  p.lowered = decompose(p.canonical ? *p.canonical : graph, options);
  plan(p, name, plan_options);
  return p;
}

bool compile(const CompileRequest &request, DiagnosticEngine &diagnostics, CompileResult &result,
             const std::function<void(const std::string &)> &on_step) {
  Compilation c(request, diagnostics, result);
  struct Step {
    const char *name;
    std::function<void()> run;
    bool enabled = true;
  };
  // The pipeline. Each step runs once, in this order; a step that reports
  // an error ends the compile before anything is written.
  const std::vector<Step> steps = {
      {"validate", [&] { validate(c); }},
      {"load", [&] { load(c); }},
      {"canonicalize", [&] {
         c.planned.source = c.model.graph.get();
         c.planned.canonical = canonicalize(*c.model.graph);
       }},
      {"decompose", [&] {
         const Graph &g = c.planned.canonical ? *c.planned.canonical : *c.model.graph;
         c.planned.lowered = decompose(g, c.backend->decompose_options());
       }},
      {"plan", [&] {
         plan(c.planned, c.name, c.backend->plan_options());
         set_rank(c.planned, c.request.rank);
         use_source_names(c.planned, c.model.source_names);
       }},
      {"backend", [&] { run_backend(c); }},
      {"verify-reproducible", [&] { verify_reproducible(c); }, request.verify_reproducible},
      {"artifacts", [&] { artifacts(c); }},
      {"write", [&] { write(c); }},
  };
  for (const Step &step : steps) {
    if (!step.enabled)
      continue;
    if (on_step)
      on_step(step.name);
    try {
      result.timer.run(step.name, step.run);
    } catch (const Error &e) {
      diagnostics.error(e, e.code() == ErrorCode::FileWrite || step.name == std::string("write") ? "" : request.model,
                        "");
    }
    if (diagnostics.has_errors())
      return false;
    if (request.print_outputs && step.name == std::string("load"))
      return true; // the paths are known: --print-outputs compiles nothing
  }
  return true;
}

} // namespace maxc::driver
