// In-process runs through a backend's host module (ORC JIT): `maxc run
// --device cpu|amdgpu-emu` and the tests that compare compiled kernels with
// the reference interpreter. The same load → decompose → plan as a compile.
#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Communicator.h"
#include "maxc/Support/Error.h"

#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <chrono>

namespace maxc::driver {

namespace {
/// "the compiled model returned status 10 (the state has no room ...)".
std::string status_message(int32_t status) {
  std::string text = "the compiled model returned status " + std::to_string(status);
  for (const StatusInfo &row : status_table())
    if (static_cast<int32_t>(row.status) == status)
      return text + " (" + row.message + ")";
  return text;
}
} // namespace

namespace {

/// NAME_run_packed's arguments: the buffer table (inputs, then outputs
/// allocated here) and the dim values, in the artifact's symbol order.
struct RunBuffers {
  std::vector<HostTensor> outputs;
  std::vector<void *> buffers;
  std::vector<int64_t> dims;

  RunBuffers(const Graph &graph, const std::vector<HostTensor> &inputs, const DimBindings &bindings,
             const ModelInterface &abi)
      : graph_(graph), bindings_(bindings), abi_(abi) {
    // An output sized by a symbol a node defines: a buffer of its bound
    // (bound_node_symbols), cut to the run's value after (finish).
    const SymbolTable &table = graph.symbol_table();
    for (ValueId id : graph.output_ids()) {
      Shape bound;
      for (const Dim &d : graph.type_of(id).shape)
        bound.push_back(bound_node_symbols(d, table, "an output"));
      outputs.emplace_back(graph.type_of(id).dtype, evaluate_shape(bound, bindings));
    }
    for (const HostTensor &x : inputs)
      buffers.push_back(const_cast<std::byte *>(x.data())); // read only, except state buffers: written in place
    for (HostTensor &y : outputs)
      buffers.push_back(y.data());
    for (const std::string &s : abi.symbols) {
      auto it = bindings.find(s);
      if (it == bindings.end())
        throw Error(ErrorCode::UnboundDim, "symbolic dim '" + s + "' has no value; pass --dim " + s + "=N");
      dims.push_back(it->second);
    }
    if (reports_defined_symbols(abi)) // the run writes their values after the C dims
      dims.resize(dims.size() + abi.defined_symbols.size(), 0);
  }

  /// The outputs at their run-time shapes (the defined symbols' values the
  /// run reported).
  std::vector<HostTensor> finish() {
    if (!reports_defined_symbols(abi_))
      return std::move(outputs);
    DimBindings all = bindings_;
    for (size_t k = 0; k < abi_.defined_symbols.size(); ++k)
      all[abi_.defined_symbols[k]] = dims[abi_.symbols.size() + k];
    std::vector<HostTensor> out;
    for (size_t i = 0; i < outputs.size(); ++i) {
      HostTensor y(outputs[i].dtype(), evaluate_shape(graph_.type_of(graph_.output_ids()[i]).shape, all));
      if (y.nbytes() > outputs[i].nbytes())
        throw Error(ErrorCode::Internal, "output " + std::to_string(i) + " is larger than its bound");
      std::copy(outputs[i].data(), outputs[i].data() + y.nbytes(), y.data()); // row-major: a prefix
      out.push_back(std::move(y));
    }
    return out;
  }

private:
  const Graph &graph_;
  DimBindings bindings_;
  const ModelInterface &abi_;
};

} // namespace

struct HostModel::Impl {
  std::string backend;
  const Graph *graph = nullptr;
  PlannedModel planned;
  std::unique_ptr<JitModule> jit;
  int32_t (*run)(void *const *, const int64_t *, void *) = nullptr;
  void (*set_threads)(int32_t) = nullptr; // the CPU artifact's pool; null elsewhere
  void (*set_communicator)(const CCommunicator *) = nullptr; // a rank's program (abi.world > 0)
  CCommunicator comm;
};

HostModel::HostModel(const std::string &backend_name, const Graph &graph, int opt_level, int threads)
    : impl_(std::make_unique<Impl>()) {
  const Backend *backend = find_backend(backend_name);
  if (!backend)
    throw Error(ErrorCode::InvalidArgument, "unknown backend '" + backend_name + "' (expected " + backend_names() + ")");
  impl_->backend = backend_name;
  impl_->graph = &graph;
  impl_->planned = plan_model(graph, "maxc_jit", backend->decompose_options(), backend->plan_options());
  if (impl_->planned.abi.world > 0 && backend_name != "cpu" && backend_name != "amdgpu-emu")
    throw Error(ErrorCode::InvalidArgument, "a tensor-parallel rank's program runs on the cpu backend and the GPU "
                                            "emulator only, not " + backend_name + " (docs/tensor-parallel.md)");
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = backend->build_host_module(impl_->planned, *context);
  if (!module)
    throw Error(ErrorCode::InvalidArgument, "the " + backend_name + " backend's code cannot run on this machine");
  impl_->jit = std::make_unique<JitModule>(std::move(context), std::move(module), opt_level);
  impl_->run = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(
      impl_->jit->lookup("maxc_jit_run_packed"));
  if (backend_name == "cpu")
    impl_->set_threads = reinterpret_cast<void (*)(int32_t)>(impl_->jit->lookup("maxc_jit_set_num_threads"));
  if (impl_->set_threads)
    impl_->set_threads(threads);
  if (impl_->planned.abi.world > 0)
    impl_->set_communicator =
        reinterpret_cast<void (*)(const CCommunicator *)>(impl_->jit->lookup("maxc_jit_set_communicator"));
}

void HostModel::set_communicator(maxc::Communicator &comm) {
  if (!impl_->set_communicator)
    throw Error(ErrorCode::InvalidArgument, "the model has no collectives: it is no rank of a tensor-parallel program");
  impl_->comm = c_communicator(comm);
  impl_->set_communicator(&impl_->comm);
}

std::vector<HostTensor> run_ranks_on_host(const std::string &backend, const std::vector<const Graph *> &rank_programs,
                                          const std::vector<std::vector<HostTensor>> &inputs, const DimBindings &dims,
                                          int opt_level, int threads) {
  std::vector<std::unique_ptr<HostModel>> models;
  for (const Graph *g : rank_programs)
    models.push_back(std::make_unique<HostModel>(backend, *g, opt_level, threads));
  std::vector<std::vector<HostTensor>> out(models.size());
  run_ranks(static_cast<int>(models.size()), [&](int r) {
    models[r]->set_communicator(*current_communicator());
    out[r] = models[r]->run(inputs[r], dims);
  });
  return out.at(0);
}

HostModel::~HostModel() {
  // The pool's workers are joined before the JIT'd code goes.
  if (impl_ && impl_->set_threads)
    impl_->set_threads(1);
}

std::vector<HostTensor> HostModel::run(const std::vector<HostTensor> &inputs, DimBindings dims) {
  bind_input_dims(*impl_->graph, inputs, dims);
  RunBuffers io(*impl_->graph, inputs, dims, impl_->planned.abi);
  int32_t status = impl_->run(io.buffers.data(), io.dims.data(), nullptr);
  const ModelInterface &abi = impl_->planned.abi;
  if (status == static_cast<int32_t>(RunStatus::invalid_dim) && !abi.defined_symbols.empty()) {
    std::string list;
    for (size_t k = 0; k < abi.defined_symbols.size(); ++k)
      list += (k ? ", " : "") + abi.defined_symbols[k] + " <= " + std::to_string(abi.defined_bounds[k]);
    throw Error(ErrorCode::InputMismatch, status_message(status) + ": a dim the model reads from a value at run "
                                          "time is outside its bound (" + list + ")");
  }
  if (status == static_cast<int32_t>(RunStatus::collective)) {
    std::string why = take_collective_error();
    throw Error(ErrorCode::Collective, status_message(status) + (why.empty() ? "" : ": " + why));
  }
  if (status != 0)
    throw Error(ErrorCode::InputMismatch, status_message(status));
  return io.finish();
}

std::vector<HostTensor> run_on_host(const std::string &backend_name, const Graph &graph,
                                    const std::vector<HostTensor> &inputs, DimBindings dims, int opt_level,
                                    int threads) {
  return HostModel(backend_name, graph, opt_level, threads).run(inputs, std::move(dims));
}

HostProfile profile_on_host(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims, int threads,
                            int runs, int warmup, int opt_level) {
  const Backend *backend = find_backend("cpu");
  bind_input_dims(graph, inputs, dims);
  PlannedModel planned = plan_model(graph, "maxc_jit", backend->decompose_options(), backend->plan_options());
  HostProfile out;
  out.kernels = profiled_kernels(*planned.lowered, planned.plans);
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = build_cpu_module(*planned.lowered, planned.abi, *context,
                                                          WeightsPlacement::ir, nullptr, &planned.plans, 0, true);
  // The counters, read here after the runs (the artifact keeps them internal).
  llvm::GlobalVariable *table = module->getGlobalVariable("maxc_jit.profile.counters", true);
  if (!table)
    throw Error(ErrorCode::Internal, "the profile build has no counter table");
  table->setLinkage(llvm::GlobalValue::ExternalLinkage);
  JitModule jit(std::move(context), std::move(module), opt_level, "native",
                [&](llvm::Module &m) { out.scalar_loops = scalar_strided_loops(m); });
  auto run = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit.lookup("maxc_jit_run_packed"));
  auto reset = reinterpret_cast<void (*)()>(jit.lookup("maxc_jit_profile_reset"));
  auto set_threads = reinterpret_cast<void (*)(int32_t)>(jit.lookup("maxc_jit_set_num_threads"));
  const auto *counters = reinterpret_cast<const int64_t *>(jit.lookup("maxc_jit.profile.counters"));
  RunBuffers io(graph, inputs, dims, planned.abi);
  set_threads(threads);
  out.threads = threads;
  // One workspace for every run, as an application keeps it (a run given
  // none mallocs its own, and the kernels would pay its first touches).
  int64_t ws_bytes = planned.abi.workspace_bound.is_static()
                         ? planned.abi.workspace_bound.value()
                         : evaluate_shape(Shape{planned.abi.workspace_bound}, dims).at(0);
  std::vector<std::byte> ws_storage(static_cast<size_t>(std::max<int64_t>(ws_bytes, 0)) + 64);
  void *workspace = ws_storage.data() + (64 - reinterpret_cast<uintptr_t>(ws_storage.data()) % 64) % 64;
  int32_t status = 0;
  double ms = 0;
  for (int i = 0; i < warmup + runs && status == 0; ++i) {
    if (i == warmup)
      reset();
    auto t0 = std::chrono::steady_clock::now();
    status = run(io.buffers.data(), io.dims.data(), workspace);
    if (i >= warmup)
      ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  set_threads(1);
  if (status != 0)
    throw Error(ErrorCode::InputMismatch, status_message(status));
  out.runs = runs;
  out.run_ms = runs > 0 ? ms / runs : 0;
  for (size_t k = 0; k < out.kernels.size(); ++k) {
    out.counters.push_back({counters[3 * k], counters[3 * k + 1], counters[3 * k + 2]});
    out.kernels[k].graph = nullptr;
  }
  return out;
}

} // namespace maxc::driver

namespace maxc {


std::vector<HostTensor> run_compiled_on_host(const Graph &graph, const std::vector<HostTensor> &inputs,
                                             DimBindings dims, int opt_level) {
  return driver::run_on_host("cpu", graph, inputs, std::move(dims), opt_level);
}

std::vector<HostTensor> run_gpu_emulated(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                                         int opt_level) {
  return driver::run_on_host("amdgpu-emu", graph, inputs, std::move(dims), opt_level);
}

} // namespace maxc
