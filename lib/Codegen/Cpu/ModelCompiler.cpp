#include "maxc/Codegen/ModelCompiler.h"

#include "maxc/Codegen/CompileJobs.h"
#include "EntryPointUtil.h"
#include "LldLink.h"
#include "maxc/Codegen/ModuleSplit.h"
#include "Cpu/CpuCheck.h"
#include "Cpu/KernelEmitter.h"
#include "Cpu/GemmPanels.h"
#include "Cpu/WinogradEmitter.h"
#include "Cpu/Runtime.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/Profile.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Support/Async.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Decompose.h"

#include <llvm/IR/IRBuilder.h>
#include <spdlog/spdlog.h>
#include <llvm/IR/Module.h>

#include <future>
#include <system_error>


namespace maxc {

namespace {

void return_status_if(llvm::IRBuilder<> &b, llvm::Value *cond, RunStatus status) {
  codegen::return_if(b, cond, b.getInt32(static_cast<int32_t>(status)));
}

// The exported C entry points around the root graph function.
// With a CPU check (`check.missing` set) a CPU without the code's features
// gets ERROR_UNSUPPORTED_CPU from NAME_run and -1 from NAME_workspace_size.
// `roots`: the root graph's functions of each code variant (--cpu A,B:
// check.variant picks one per call; one variant: no choice).
void emit_entry_points(llvm::Module &module, const ModelInterface &m, const std::vector<codegen::EmittedGraph> &roots,
                       llvm::GlobalVariable *weights_base, bool profile, const codegen::CpuCheck &check) {
  llvm::LLVMContext &c = module.getContext();
  llvm::IRBuilder<> b(c);
  // The chosen variant's function: `variant` (i32) selects among the roots'.
  auto variant_fn = [&](llvm::Value *variant, llvm::Function *codegen::EmittedGraph::*fn) -> llvm::Value * {
    llvm::Value *callee = roots[0].*fn;
    for (size_t v = 1; v < roots.size(); ++v)
      callee = b.CreateSelect(b.CreateICmpEQ(variant, b.getInt32(static_cast<int32_t>(v))), roots[v].*fn, callee);
    return callee;
  };
  auto call = [&](llvm::Value *variant, llvm::Function *codegen::EmittedGraph::*fn,
                  std::initializer_list<llvm::Value *> args) {
    return b.CreateCall((roots[0].*fn)->getFunctionType(), variant_fn(variant, fn), args);
  };
  llvm::Type *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty(), *ptr = b.getPtrTy();
  size_t nbuf = m.inputs.size() + m.outputs.size(), ndims = m.symbols.size();
  llvm::FunctionCallee malloc_fn = module.getOrInsertFunction("malloc", ptr, i64);
  llvm::FunctionCallee free_fn = module.getOrInsertFunction("free", b.getVoidTy(), ptr);

  // NAME_run_packed(buffers, dims, workspace)
  auto *packed = llvm::Function::Create(llvm::FunctionType::get(i32, {ptr, ptr, ptr}, false),
                                        llvm::GlobalValue::ExternalLinkage, m.name + "_run_packed", module);
  {
    auto *entry = llvm::BasicBlock::Create(c, "entry", packed);
    b.SetInsertPoint(entry);
    llvm::Value *buffers = packed->getArg(0), *dims = packed->getArg(1), *ws = packed->getArg(2);
    auto fail_if = [&](llvm::Value *cond, RunStatus status) { return_status_if(b, cond, status); };
    llvm::Value *variant = b.getInt32(0);
    if (check.missing) { // before anything compiled for the target's features runs
      variant = b.CreateCall(check.variant, {}, "variant");
      fail_if(b.CreateICmpSLT(variant, b.getInt32(0)), RunStatus::unsupported_cpu);
    }
    fail_if(b.CreateICmpEQ(buffers, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
    for (size_t i = 0; i < nbuf; ++i) {
      llvm::Value *p = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, buffers, i));
      fail_if(b.CreateICmpEQ(p, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
    }
    if (ndims) {
      fail_if(b.CreateICmpEQ(dims, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
      // Dims are sizes: negative or absurd (> 2^40) values, and values for
      // which the workspace size overflows, are rejected.
      fail_if(codegen::dims_invalid(b, dims, m.symbols, m.workspace_bound), RunStatus::invalid_dim);
      if (m.state) // the appended rows must fit the buffers
        fail_if(codegen::state_overflows(b, dims, m.symbols, *m.state), RunStatus::state_full);
    }
    if (weights_base)
      fail_if(b.CreateICmpEQ(b.CreateLoad(ptr, weights_base), llvm::ConstantPointerNull::get(b.getPtrTy())),
              RunStatus::weights_not_set);
    if (profile) // a run the profile counters cover (RuntimeProfile.c)
      b.CreateCall(module.getOrInsertFunction(m.name + ".rt.profile_run", b.getVoidTy()));
    // The graph functions' dims: a slot more per symbol a node defines.
    llvm::Value *caller_dims = dims;
    dims = codegen::graph_dims_array(b, dims, ndims, m.internal_dims());
    // After a run: a defined symbol out of its bound fails it; the values
    // go back to the caller when an output's size names them.
    auto finish = [&] {
      if (m.world > 0) // a rank's program: did a collective fail? (RuntimePool.c)
        fail_if(b.CreateICmpNE(b.CreateCall(module.getOrInsertFunction(m.name + ".rt.take_comm_status", i32)),
                               b.getInt32(0)),
                RunStatus::collective);
      if (!m.defined_symbols.empty())
        fail_if(codegen::defined_symbols_failed(b, dims, caller_dims, ndims, m.internal_dims(),
                                                m.defined_symbols.size(), reports_defined_symbols(m)),
                RunStatus::invalid_dim);
      b.CreateRet(b.getInt32(0));
    };
    auto *own = llvm::BasicBlock::Create(c, "own_workspace", packed);
    auto *given = llvm::BasicBlock::Create(c, "given_workspace", packed);
    b.CreateCondBr(b.CreateICmpEQ(ws, llvm::ConstantPointerNull::get(b.getPtrTy())), own, given);
    b.SetInsertPoint(given);
    call(variant, &codegen::EmittedGraph::run, {buffers, dims, ws});
    finish();
    b.SetInsertPoint(own);
    llvm::Value *size = call(variant, &codegen::EmittedGraph::workspace_size, {dims});
    llvm::Value *mem = b.CreateCall(malloc_fn, {b.CreateAdd(size, b.getInt64(64))});
    fail_if(b.CreateICmpEQ(mem, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::out_of_memory);
    // Align to 64 bytes by hand (malloc gives 16).
    call(variant, &codegen::EmittedGraph::run, {buffers, dims, codegen::align_to_64(b, mem)});
    b.CreateCall(free_fn, {mem});
    finish();
  }

  // NAME_run(in..., out..., dims..., workspace)
  std::vector<llvm::Type *> params(nbuf, ptr);
  params.insert(params.end(), ndims, i64);
  params.push_back(ptr);
  auto *run = llvm::Function::Create(llvm::FunctionType::get(i32, params, false), llvm::GlobalValue::ExternalLinkage,
                                     m.name + "_run", module);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", run));
    llvm::Value *buffers = b.CreateAlloca(ptr, b.getInt64(static_cast<int64_t>(std::max<size_t>(nbuf, 1))));
    size_t reported = reports_defined_symbols(m) ? m.defined_symbols.size() : 0; // written back, unread
    llvm::Value *dims = b.CreateAlloca(i64, b.getInt64(static_cast<int64_t>(std::max<size_t>(ndims + reported, 1))));
    for (size_t i = 0; i < nbuf; ++i)
      b.CreateStore(run->getArg(static_cast<unsigned>(i)), b.CreateConstGEP1_64(ptr, buffers, i));
    for (size_t i = 0; i < ndims; ++i)
      b.CreateStore(run->getArg(static_cast<unsigned>(nbuf + i)), b.CreateConstGEP1_64(i64, dims, i));
    b.CreateRet(b.CreateCall(packed, {buffers, dims, run->getArg(static_cast<unsigned>(nbuf + ndims))}));
  }

  // NAME_workspace_size(dims...)
  auto *size_fn = llvm::Function::Create(llvm::FunctionType::get(i64, std::vector<llvm::Type *>(ndims, i64), false),
                                         llvm::GlobalValue::ExternalLinkage, m.name + "_workspace_size", module);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", size_fn));
    llvm::Value *dims = b.CreateAlloca(i64, b.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
    for (size_t i = 0; i < ndims; ++i)
      b.CreateStore(size_fn->getArg(static_cast<unsigned>(i)), b.CreateConstGEP1_64(i64, dims, i));
    // -1 for the dims NAME_run rejects with INVALID_DIM, and on a CPU it
    // rejects with UNSUPPORTED_CPU.
    llvm::Value *variant = b.getInt32(0);
    if (check.missing) {
      variant = b.CreateCall(check.variant, {}, "variant");
      codegen::return_if(b, b.CreateICmpSLT(variant, b.getInt32(0)), b.getInt64(-1));
    }
    codegen::return_if(b, codegen::dims_invalid(b, dims, m.symbols, m.workspace_bound), b.getInt64(-1));
    // The graph functions' whole array (calls copy it: per-call dims).
    b.CreateRet(call(variant, &codegen::EmittedGraph::workspace_size,
                     {codegen::graph_dims_array(b, dims, ndims, m.internal_dims())}));
  }

  if (m.state) {
    codegen::HostStateTarget state(packed);
    codegen::emit_state_entry_points(module, m, size_fn, state);
  }

  // NAME_set_parallel_for and NAME_set_num_threads come with the runtime
  // (Cpu/Runtime.h), linked in by build_cpu_module.

  // NAME_set_weights(blob, size): external weights, checked by size,
  // alignment (64) and lanes64 checksum (Support/Sha256.h) before they are used.
  if (weights_base) {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(i32, {ptr, i64}, false),
                                      llvm::GlobalValue::ExternalLinkage, m.name + "_set_weights", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", fn));
    llvm::Value *blob = fn->getArg(0), *size = fn->getArg(1);
    auto fail_if = [&](llvm::Value *cond, RunStatus status) { return_status_if(b, cond, status); };
    fail_if(b.CreateICmpEQ(blob, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
    fail_if(b.CreateICmpNE(size, b.getInt64(static_cast<int64_t>(m.weights_blob_bytes))), RunStatus::weights_mismatch);
    fail_if(b.CreateICmpNE(b.CreateAnd(b.CreatePtrToInt(blob, i64), b.getInt64(63)), b.getInt64(0)),
            RunStatus::weights_mismatch);
    // lanes64 over the bytes: eight independent multiply-rotate chains over
    // the whole 64-byte blocks (the size is the constant just checked), then
    // the last size % 64 bytes one by one, then the size.
    const uint64_t blob_bytes = m.weights_blob_bytes, blocks = blob_bytes / Lanes64::kBlock;
    auto step = [&](llvm::Value *x, llvm::Value *w) {
      llvm::Value *y = b.CreateMul(b.CreateXor(x, w), b.getInt64(static_cast<int64_t>(Lanes64::kPrime)));
      return b.CreateIntrinsic(llvm::Intrinsic::fshl, {i64}, {y, y, b.getInt64(Lanes64::kRotate)});
    };
    auto *pre = b.GetInsertBlock();
    auto *loop = llvm::BasicBlock::Create(c, "sum", fn);
    auto *body = llvm::BasicBlock::Create(c, "sum.body", fn);
    auto *done = llvm::BasicBlock::Create(c, "sum.done", fn);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode *j = b.CreatePHI(i64, 2);
    j->addIncoming(b.getInt64(0), pre);
    std::vector<llvm::PHINode *> lanes;
    for (int k = 0; k < Lanes64::kLanes; ++k) {
      lanes.push_back(b.CreatePHI(i64, 2));
      lanes.back()->addIncoming(b.getInt64(static_cast<int64_t>(Lanes64::kBasis + k)), pre);
    }
    b.CreateCondBr(b.CreateICmpULT(j, b.getInt64(static_cast<int64_t>(blocks))), body, done);
    b.SetInsertPoint(body);
    llvm::Value *block = b.CreateGEP(b.getInt8Ty(), blob, b.CreateMul(j, b.getInt64(Lanes64::kBlock)));
    const bool big_endian = module.getDataLayout().isBigEndian();
    for (int k = 0; k < Lanes64::kLanes; ++k) {
      llvm::Value *w = b.CreateAlignedLoad(i64, b.CreateConstGEP1_64(b.getInt8Ty(), block, 8 * k), llvm::Align(8));
      if (big_endian) // the words are little-endian
        w = b.CreateUnaryIntrinsic(llvm::Intrinsic::bswap, w);
      lanes[k]->addIncoming(step(lanes[k], w), body);
    }
    j->addIncoming(b.CreateAdd(j, b.getInt64(1)), body);
    b.CreateBr(loop);
    b.SetInsertPoint(done);
    llvm::Value *h = b.getInt64(static_cast<int64_t>(Lanes64::kBasis));
    for (llvm::PHINode *lane : lanes)
      h = step(h, lane);
    for (uint64_t i = blocks * Lanes64::kBlock; i < blob_bytes; ++i) {
      llvm::Value *byte = b.CreateZExt(b.CreateLoad(b.getInt8Ty(), b.CreateConstGEP1_64(b.getInt8Ty(), blob, i)), i64);
      h = b.CreateMul(b.CreateXor(h, byte), b.getInt64(static_cast<int64_t>(Lanes64::kPrime)));
    }
    h = step(h, b.getInt64(static_cast<int64_t>(blob_bytes)));
    // The expected checksum is read from NAME.weights.checksum, which the
    // object writer defines (compile_cpu_module), so that summing every weight byte
    // runs beside LLVM's optimization and emission instead of before them.
    auto *expected = new llvm::GlobalVariable(module, i64, true, llvm::GlobalValue::ExternalLinkage, nullptr,
                                              m.name + ".weights.checksum");
    expected->setVisibility(llvm::GlobalValue::HiddenVisibility);
    expected->setDSOLocal(true);
    expected->setAlignment(llvm::Align(8));
    fail_if(b.CreateICmpNE(h, b.CreateLoad(i64, expected)), RunStatus::weights_mismatch);
    b.CreateStore(blob, weights_base);
    b.CreateRet(b.getInt32(0));
  }

  // NAME_cpu_variant(): which --cpu variant runs here (-1: none); and,
  // where nothing is checked (a baseline CPU), NAME_check_cpu() is OK: every
  // CPU artifact exports both.
  {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), false),
                                      llvm::GlobalValue::ExternalLinkage, m.name + "_cpu_variant", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", fn));
    b.CreateRet(check.variant ? static_cast<llvm::Value *>(b.CreateCall(check.variant)) : b.getInt32(0));
  }
  if (!check.check) {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), false),
                                      llvm::GlobalValue::ExternalLinkage, m.name + "_check_cpu", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", fn));
    b.CreateRet(b.getInt32(static_cast<int32_t>(RunStatus::ok)));
  }

  // NAME_status_string(status)
  auto *status_fn = llvm::Function::Create(llvm::FunctionType::get(ptr, {i32}, false),
                                           llvm::GlobalValue::ExternalLinkage, m.name + "_status_string", module);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", status_fn));
    auto *unknown = llvm::BasicBlock::Create(c, "unknown", status_fn);
    std::vector<StatusInfo> codes = status_codes(false, m.state.has_value(), m.world > 0);
    auto *sw = b.CreateSwitch(status_fn->getArg(0), unknown, static_cast<unsigned>(codes.size()));
    for (const StatusInfo &info : codes) {
      int32_t s = static_cast<int32_t>(info.status);
      auto *bb = llvm::BasicBlock::Create(c, "status", status_fn);
      sw->addCase(b.getInt32(s), bb);
      b.SetInsertPoint(bb);
      if (info.status == RunStatus::unsupported_cpu && check.message) { // names the missing features
        b.CreateRet(b.CreateCall(check.message));
        continue;
      }
      b.CreateRet(b.CreateGlobalStringPtr(info.message, m.name + ".status." + std::to_string(s), 0, &module));
    }
    b.SetInsertPoint(unknown);
    b.CreateRet(b.CreateGlobalStringPtr("unknown status", m.name + ".status.unknown", 0, &module));
  }
}

/// Profile builds: NAME_profile_report(FILE *) and NAME_profile_reset(),
/// around the runtime's (RuntimeProfile.c), over the counter table `table`
/// of `kernels`, each described by one "KERNEL\tGRAPH\tNODES" string.
void emit_profile_entry_points(llvm::Module &module, const std::string &name, llvm::GlobalVariable *table,
                               const std::vector<ProfiledKernel> &kernels) {
  llvm::LLVMContext &c = module.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty(), *void_type = b.getVoidTy();
  auto clean = [](std::string text) { // one line, tab-separated fields
    for (char &ch : text)
      if (ch == '\t' || ch == '\n' || ch == '\r')
        ch = ' ';
    return text;
  };
  std::vector<llvm::Constant *> about;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const ProfiledKernel &kernel = kernels[k];
    std::string line =
        clean(kernel.label()) + "\t" + clean(kernel.graph_name) + "\t" + clean(kernel.nodes_summary());
    about.push_back(b.CreateGlobalStringPtr(line, name + ".profile.kernel." + std::to_string(k), 0, &module));
  }
  auto *about_type = llvm::ArrayType::get(ptr, std::max<size_t>(about.size(), 1));
  if (about.empty())
    about.push_back(llvm::ConstantPointerNull::get(b.getPtrTy()));
  auto *about_table = new llvm::GlobalVariable(module, about_type, true, llvm::GlobalValue::InternalLinkage,
                                               llvm::ConstantArray::get(about_type, about), name + ".profile.kernels");
  llvm::Value *count = b.getInt64(static_cast<int64_t>(kernels.size()));

  auto *report = llvm::Function::Create(llvm::FunctionType::get(void_type, {ptr}, false),
                                        llvm::GlobalValue::ExternalLinkage, name + "_profile_report", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", report));
  b.CreateCall(module.getOrInsertFunction(name + ".rt.profile_report", void_type, ptr, ptr, ptr, i64, ptr),
               {report->getArg(0), table, about_table, count,
                b.CreateGlobalStringPtr(name, name + ".profile.model", 0, &module)});
  b.CreateRetVoid();

  auto *reset = llvm::Function::Create(llvm::FunctionType::get(void_type, false), llvm::GlobalValue::ExternalLinkage,
                                       name + "_profile_reset", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", reset));
  b.CreateCall(module.getOrInsertFunction(name + ".rt.profile_reset", void_type, ptr, i64), {table, count});
  b.CreateRetVoid();
}

/// The weights outside the IR: the blob (views of the constants, GEMM
/// weights packed in panel order, then the Winograd transforms) and each
/// constant's offset in it.
ByteChunks layout_weights(const Graph &lowered, codegen::ConstantOffsets &offsets,
                          const codegen::PackedWeights &packed, const LoweringPlans &plans) {
  // A constant is packed (every use a GEMM's B) or stored Winograd-
  // transformed (every use a Winograd conv's weight), never both.
  const codegen::WinogradOnly winograd = codegen::plan_winograd_only(lowered, plans);
  codegen::ConstantRewrite pack = codegen::packed_weights_rewrite(packed),
                           transform = codegen::winograd_weights_rewrite(winograd);
  ByteChunks blob = codegen::weights_blob(lowered, offsets, [&](const Graph &g, const std::string &name) {
    auto rewritten = pack(g, name);
    return rewritten.first ? rewritten : transform(g, name);
  });
  codegen::append_winograd_weights(lowered, blob, offsets, winograd);
  return blob;
}

/// What a CPU module is built from: the whole model (only = null), or one
/// partition of it: the root (entry points, runtime, main graph function)
/// or one subgraph definition.
struct ModuleSpec {
  const Graph &lowered;
  const ModelInterface &abi;
  WeightsPlacement placement;
  const codegen::ConstantOffsets *offsets; // unless placement is ir
  uint64_t blob_bytes;
  const LoweringPlans *plans;
  unsigned vector_lanes;
  const codegen::PackedWeights *packed; // GEMM weights packed at compile time
  const Graph *only;
  const std::vector<ProfiledKernel> *profile = nullptr; // a profile build's kernels; null: not one
  /// The targets of the code variants (maxc compile --cpu A,B,...), whose
  /// features the entry points check before the first run (Cpu/CpuCheck.h);
  /// null: no check (the JIT runs on the host).
  const std::vector<CpuTarget> *targets = nullptr;
  /// This module's variant (an index in `targets`): variant 0's root
  /// partition holds the entry points and the runtime; another's graph
  /// functions are renamed NAME.v<N>.graph.* / NAME.v<N>.workspace.*.
  size_t variant = 0;
  /// The integer GEMM's dot product (cpu_int8_dot); -1: the host's when
  /// vector_lanes is 0 (the JIT), else the portable IR's.
  int int8_dot = -1;
};

/// A graph function's name in code variant `v`: NAME.graph.X -> NAME.vV.graph.X.
std::string variant_symbol(const std::string &symbol, const std::string &name, size_t v) {
  return v == 0 ? symbol : name + ".v" + std::to_string(v) + symbol.substr(name.size());
}

/// Makes `gv` a hidden global: defined in one partition, used by others.
void share(llvm::GlobalValue *gv) {
  gv->setLinkage(llvm::GlobalValue::ExternalLinkage);
  gv->setVisibility(llvm::GlobalValue::HiddenVisibility);
  gv->setDSOLocal(true);
}

std::unique_ptr<llvm::Module> build_module(const ModuleSpec &spec, llvm::LLVMContext &context) {
  const Graph &lowered = spec.lowered;
  const std::string &name = spec.abi.name;
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  const bool split = spec.only != nullptr, main = !split || spec.only == &lowered;
  const bool entry = main && spec.variant == 0; // the entry points, the runtime, shared globals
  const size_t variants = spec.targets ? spec.targets->size() : 1;
  ModelInterface m = spec.abi;
  std::string module_name = name;
  for (const auto &[sub_name, sub] : lowered.subgraphs())
    if (sub.get() == spec.only)
      module_name += ".sub." + sub_name;
  auto module = std::make_unique<llvm::Module>(module_name, context);
  std::unique_ptr<codegen::ExternalWeights> external;
  if (spec.placement != WeightsPlacement::ir) {
    external = std::make_unique<codegen::ExternalWeights>();
    external->offsets = *spec.offsets;
    llvm::Type *ptr = llvm::PointerType::getUnqual(context);
    if (spec.placement == WeightsPlacement::object_section) {
      // Only a symbol: append_weights_section defines it in the object.
      external->symbol = new llvm::GlobalVariable(
          *module, llvm::ArrayType::get(llvm::Type::getInt8Ty(context), spec.blob_bytes), true,
          llvm::GlobalValue::ExternalLinkage, nullptr, name + ".weights.data");
      external->symbol->setVisibility(llvm::GlobalValue::HiddenVisibility);
      external->symbol->setDSOLocal(true);
      external->symbol->setAlignment(llvm::Align(64));
    } else {
      // The blob's address, set by NAME_set_weights: the root's partition
      // defines it, the others read it.
      external->base = new llvm::GlobalVariable(
          *module, ptr, false, llvm::GlobalValue::InternalLinkage,
          entry ? llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(context)) : nullptr, name + ".weights");
      if (split)
        share(external->base);
      m.external_weights = true;
      m.weights_blob_bytes = spec.blob_bytes;
    }
  }
  // Profile builds: one counter (three i64) per kernel, in the root's
  // partition (shared with the others).
  std::unique_ptr<codegen::KernelCounters> counters;
  if (spec.profile) {
    counters = std::make_unique<codegen::KernelCounters>();
    auto *type = llvm::ArrayType::get(llvm::ArrayType::get(llvm::Type::getInt64Ty(context), 3),
                                      std::max<size_t>(spec.profile->size(), 1));
    counters->table = new llvm::GlobalVariable(*module, type, false, llvm::GlobalValue::InternalLinkage,
                                               entry ? llvm::ConstantAggregateZero::get(type) : nullptr,
                                               name + ".profile.counters");
    counters->table->setAlignment(llvm::Align(64));
    if (split)
      share(counters->table);
    for (size_t k = 0; k < spec.profile->size(); ++k)
      counters->index[{(*spec.profile)[k].graph, (*spec.profile)[k].node}] = k;
  }
  codegen::EmittedGraph root = codegen::emit_graph_functions(
      *module, lowered, name, m.dims_array(), spec.vector_lanes ? spec.vector_lanes : host_vector_lanes(),
      spec.int8_dot >= 0 ? static_cast<unsigned>(spec.int8_dot)
      : spec.vector_lanes ? kInt8DotGeneric
                          : host_int8_dot(),
      external.get(),
      spec.plans, spec.packed, spec.only, counters.get());
  if (entry) {
    codegen::CpuCheck check;
    if (spec.targets)
      check = codegen::emit_cpu_check(*module, name, *spec.targets);
    std::vector<codegen::EmittedGraph> roots = {root};
    for (size_t v = 1; v < variants; ++v) { // defined in variant v's root partition
      codegen::EmittedGraph other;
      for (auto [fn, out] : {std::pair{root.run, &other.run}, std::pair{root.workspace_size, &other.workspace_size}}) {
        *out = llvm::Function::Create(fn->getFunctionType(), llvm::GlobalValue::ExternalLinkage,
                                      variant_symbol(fn->getName().str(), name, v), *module);
        (*out)->copyAttributesFrom(fn);
        share(*out);
      }
      roots.push_back(other);
    }
    emit_entry_points(*module, m, roots, external ? external->base : nullptr, spec.profile != nullptr, check);
    if (spec.profile)
      emit_profile_entry_points(*module, name, counters->table, *spec.profile);
    codegen::link_cpu_runtime(*module, name, spec.profile != nullptr,
                              spec.targets ? spec.targets->front().triple : std::string());
    if (m.world == 0) // only a tensor-parallel rank's program exports it (ModelInterface::world)
      if (llvm::Function *f = module->getFunction(name + "_set_communicator"))
        f->setLinkage(llvm::GlobalValue::InternalLinkage);
    // What may run before the check has passed is compiled for the
    // baseline: the exported functions and the runtime (the kernels are
    // not inlined into them: LLVM inlines a callee only into a caller with
    // its features).
    if (check.missing)
      for (llvm::Function &fn : *module)
        if (!fn.isDeclaration() && (fn.getName().starts_with(name + "_") || fn.getName().starts_with(name + ".rt.")))
          codegen::set_baseline_target(fn, spec.targets->front().triple);
  }
  if (spec.variant > 0) // its graph functions, defined and declared
    for (llvm::Function &fn : *module)
      if (!fn.hasLocalLinkage() &&
          (fn.getName().starts_with(name + ".graph.") || fn.getName().starts_with(name + ".workspace.")))
        fn.setName(variant_symbol(fn.getName().str(), name, spec.variant));
  if (variants > 1) { // each function says its CPU: the partitions' IR is joined for --emit asm/llvm-ir
    const CpuTarget &target = (*spec.targets)[spec.variant];
    for (llvm::Function &fn : *module)
      if (!fn.isDeclaration() && !fn.hasFnAttribute("target-cpu")) {
        fn.addFnAttr("target-cpu", target.cpu);
        if (!target.features.empty())
          fn.addFnAttr("target-features", target.features);
      }
  }
  // The runtime's functions that every partition's kernels call.
  for (const char *f : {"parallel_for", "profile_begin", "profile_end", "all_reduce_f32", "all_gather", "top_k_f32"})
    if (llvm::Function *fn = module->getFunction(name + ".rt." + f); fn && split)
      share(fn);
  codegen::verify_module(*module, "CPU model");
  return module;
}

} // namespace

std::unique_ptr<llvm::Module> build_cpu_module(const Graph &lowered, const ModelInterface &abi,
                                               llvm::LLVMContext &context, WeightsPlacement placement,
                                               ByteChunks *weights, const LoweringPlans *plans,
                                               unsigned vector_lanes, bool profile, int int8_dot) {
  LoweringPlans own_plans = plans ? LoweringPlans{} : plan_lowering_all(lowered, cpu_plan_options());
  if (!plans)
    plans = &own_plans;
  codegen::PackedWeights packed =
      codegen::plan_packed_weights(lowered, *plans, vector_lanes ? vector_lanes : host_vector_lanes(),
                                   host_converts_f16());
  codegen::ConstantOffsets offsets;
  ByteChunks blob;
  if (placement != WeightsPlacement::ir)
    blob = layout_weights(lowered, offsets, packed, *plans);
  std::vector<ProfiledKernel> kernels;
  if (profile)
    kernels = profiled_kernels(lowered, *plans);
  ModuleSpec spec{lowered, abi, placement, &offsets, blob.size(), plans, vector_lanes, &packed, nullptr,
                  profile ? &kernels : nullptr};
  spec.int8_dot = int8_dot;
  auto module = build_module(spec, context);
  if (weights)
    *weights = std::move(blob);
  return module;
}

std::vector<const Graph *> cpu_partitions(const Graph &lowered) {
  std::vector<const Graph *> out = {&lowered};
  for (const auto &[name, sub] : lowered.subgraphs())
    out.push_back(sub.get());
  return out;
}

std::unique_ptr<llvm::Module> build_model_module(const Graph &graph, const std::string &name,
                                                 llvm::LLVMContext &context, unsigned vector_lanes, int int8_dot) {
  std::unique_ptr<Graph> canonical = canonicalize(graph);
  DecomposeOptions options{/*keep_rowwise=*/true, /*fuse_attention=*/true};
  options.promote_low_precision = true; // as the CPU backend (Driver/CpuBackend.cpp)
  options.attention_kv_groups = true;
  options.keep_recurrence = true;
  options.keep_matmul_nbits = true;
  std::unique_ptr<Graph> lowered = decompose(canonical ? *canonical : graph, options);
  ModelInterface abi = describe_interface(*lowered, name);
  LoweringPlans plans = plan_lowering_all(*lowered, cpu_plan_options());
  abi.workspace_bound = workspace_bound(*lowered, &plans);
  return build_cpu_module(*lowered, abi, context, WeightsPlacement::ir, nullptr, &plans, vector_lanes, false,
                          int8_dot);
}

CpuCodegenResult compile_cpu_module(const Graph &lowered, const ModelInterface &abi,
                                    const std::vector<CpuTarget> &targets, const CpuCodegenRequest &request,
                                    PassTimer &timer, const LoweringPlans *plans) {
  CpuCodegenResult out;
  if (targets.empty())
    throw Error(ErrorCode::Internal, "compile_cpu_module: no target");
  if (targets.size() > 1 && request.profile)
    throw Error(ErrorCode::InvalidArgument, "--profile takes one CPU, not " + std::to_string(targets.size()), "--cpu");
  LoweringPlans own_plans = plans ? LoweringPlans{} : plan_lowering_all(lowered, cpu_plan_options());
  if (!plans)
    plans = &own_plans;
  // Each variant's GEMM weights packed for its vector width; the blob holds
  // variant 0's layout, then what another variant reads differently (its
  // packed panels of another width, or a constant it reads unpacked).
  std::vector<codegen::PackedWeights> packed;
  for (const CpuTarget &t : targets)
    packed.push_back(codegen::plan_packed_weights(lowered, *plans, cpu_vector_lanes(t), cpu_converts_f16(t)));
  std::vector<codegen::ConstantOffsets> offsets_of(targets.size());
  codegen::ConstantOffsets &offsets = offsets_of[0];
  ByteChunks weights = layout_weights(lowered, offsets, packed[0], *plans);
  out.variant_weights_bytes.assign(targets.size(), 0);
  auto same_packing = [&](size_t a, size_t b) {
    return packed[a].nr == packed[b].nr && packed[a].constants == packed[b].constants &&
           packed[a].narrow == packed[b].narrow;
  };
  for (size_t v = 1; v < targets.size(); ++v) {
    size_t u = 0;
    while (u < v && !same_packing(u, v))
      ++u;
    if (u < v) { // reads an earlier variant's weights
      offsets_of[v] = offsets_of[u];
      continue;
    }
    offsets_of[v] = offsets;
    const uint64_t before = weights.size();
    codegen::ConstantRewrite rewrite = codegen::packed_weights_rewrite(packed[v]);
    std::vector<const Graph *> graphs = {&lowered};
    for (const auto &[sub_name, sub] : lowered.subgraphs())
      graphs.push_back(sub.get());
    for (const Graph *g : graphs) // in layout order: the same blob every compile
      for (const auto &[key, offset] : offsets) // (by name within a graph)
        if (key.first == g && (packed[v].constants.count(key) || packed[0].constants.count(key)))
          offsets_of[v][key] = codegen::append_constant(weights, *g, key.second, rewrite);
    out.variant_weights_bytes[v] = weights.size() - before;
  }
  // The weights do not depend on the code: with the driver's writer
  // (request.early) they are written while LLVM works, on a second thread:
  // NAME.weights.bin whole (external; its lanes64 checksum taken on the way), or the
  // object's head (embedded: ELF header and weights, weights_section_head).
  // The object's head is the same ByteChunks append_weights_section gets.
  Lanes64 early_sum;
  ByteChunks object_head;
  std::unique_ptr<EarlyWrite> early;
  if (request.early && request.external_weights)
    early = request.early->start("weights", weights,
                                 [&early_sum](const char *data, size_t size) { early_sum.update(data, size); });
  else if (request.early && request.object) {
    object_head = codegen::weights_section_head(targets[0].triple, weights);
    early = request.early->start("obj", object_head, {});
    if (!early)
      object_head = ByteChunks();
  }
  auto wait_early = [&] {
    if (!early)
      return;
    double ms = timer.run("wait for weights", [&] { return early->wait(); });
    timer.record("weights (overlapped)", ms);
    early.reset();
  };
  // External weights without the writer: their checksum (one pass over
  // every byte) on a second thread while LLVM works. The object defines
  // NAME.weights.checksum.
  std::future<uint64_t> sum;
  if (request.external_weights && !early) // no thread to be had: summed here when needed
    sum = async_or_deferred([&weights] { return lanes64(weights); });
  auto blob_checksum = [&] {
    if (early && request.external_weights) {
      wait_early();
      out.weights_blob_checksum = early_sum.value();
    }
    if (sum.valid())
      out.weights_blob_checksum = sum.get();
    return out.weights_blob_checksum;
  };

  // Each partition built, optimized and emitted in its own LLVMContext on
  // one of --jobs threads. The partitions do not depend on --jobs, so the
  // bytes do not either; a model without subgraphs is one module, as
  // before partitioning. Several CPUs: every partition once per variant.
  // A big module (an inlined or flat model's root, a large definition) is
  // split once built (ModuleSplit.h: its size decides the pieces, not
  // --jobs), and its pieces are optimized and emitted as jobs of their own.
  std::vector<const Graph *> parts = cpu_partitions(lowered);
  const size_t nparts = parts.size(), variants = targets.size();
  const bool split = nparts > 1 || variants > 1;
  std::vector<ProfiledKernel> kernels;
  if (request.profile)
    kernels = profiled_kernels(lowered, *plans);
  const bool keep_ir = request.assembly || request.llvm_ir;
  struct Piece {
    std::vector<std::string> objects, bitcode; // one each, or one per piece of a split module
    std::vector<std::string> pieces;           // a split module's pieces, unoptimized
    double ms[4] = {0, 0, 0, 0}; // codegen, split, optimize, emit obj
  };
  std::vector<Piece> pieces(nparts * variants);
  WeightsPlacement placement = request.external_weights ? WeightsPlacement::run_time : WeightsPlacement::object_section;
  // Optimizes and emits one module (a whole partition or a piece of one).
  auto finish = [&](llvm::Module &module, const CpuTarget &target, PassTimer &own, std::string &object,
                    std::string &bitcode) {
    own.run("optimize", [&] { optimize_module(module, target); });
    if (keep_ir)
      bitcode = bitcode_of(module);
    if (request.object)
      object = own.run("emit obj", [&] { return emit_module(module, target, OutputKind::object); });
  };
  auto add_times = [](Piece &piece, const PassTimer &own) {
    for (const auto &[step, ms] : own.passes())
      piece.ms[step == "codegen" ? 0 : step == "split" ? 1 : step == "optimize" ? 2 : 3] += ms;
  };
  std::vector<std::pair<size_t, size_t>> split_pieces; // (partition, piece)
  timer.run("partitions", [&] {
    codegen::run_jobs(pieces.size(), request.jobs, [&](size_t i) {
      Piece &piece = pieces[i];
      const size_t v = i / nparts;
      const CpuTarget &target = targets[v];
      PassTimer own;
      llvm::LLVMContext context;
      std::unique_ptr<llvm::Module> module = own.run("codegen", [&] {
        ModuleSpec spec{lowered, abi, placement, &offsets_of[v], weights.size(), plans, cpu_vector_lanes(target),
                        &packed[v], split ? parts[i % nparts] : nullptr, request.profile ? &kernels : nullptr,
                        &targets};
        spec.variant = v;
        spec.int8_dot = static_cast<int>(cpu_int8_dot(target));
        return build_module(spec, context);
      });
      const size_t instructions = codegen::instruction_count(*module);
      piece.pieces = own.run("split", [&] {
        return codegen::split_module(*module, codegen::split_piece_count(*module),
                                     abi.name + ".part" + std::to_string(i) + ".");
      });
      if (piece.pieces.empty()) {
        piece.objects.resize(1);
        piece.bitcode.resize(1);
        finish(*module, target, own, piece.objects[0], piece.bitcode[0]);
      } else {
        piece.objects.resize(piece.pieces.size());
        piece.bitcode.resize(piece.pieces.size());
      }
      add_times(piece, own);
      spdlog::debug("partition {} ({}, {} instructions): codegen {:.1f} ms, {}", i, module->getName().str(),
                    instructions, piece.ms[0],
                    piece.pieces.empty() ? fmt::format("optimize {:.1f} ms, emit {:.1f} ms", piece.ms[2], piece.ms[3])
                                         : fmt::format("split in {} pieces", piece.pieces.size()));
    });
    for (size_t i = 0; i < pieces.size(); ++i)
      for (size_t k = 0; k < pieces[i].pieces.size(); ++k)
        split_pieces.emplace_back(i, k);
    std::vector<PassTimer> own(split_pieces.size());
    codegen::run_jobs(split_pieces.size(), request.jobs, [&](size_t j) {
      auto [i, k] = split_pieces[j];
      Piece &piece = pieces[i];
      llvm::LLVMContext context;
      std::unique_ptr<llvm::Module> module = join_bitcode({piece.pieces[k]}, context);
      finish(*module, targets[i / nparts], own[j], piece.objects[k], piece.bitcode[k]);
      spdlog::debug("partition {} piece {} ({} instructions): optimize {:.1f} ms, emit {:.1f} ms", i, k,
                    codegen::instruction_count(*module), own[j].passes()[0].second,
                    own[j].passes().size() > 1 ? own[j].passes()[1].second : 0.0);
    });
    for (size_t j = 0; j < split_pieces.size(); ++j)
      add_times(pieces[split_pieces[j].first], own[j]);
  });
  // The steps' times summed over the partitions (on --jobs threads they
  // overlap: "partitions" is the wall time).
  const char *steps[] = {"codegen", "split", "optimize", "emit obj"};
  for (int k = 0; k < (request.object ? 4 : 3); ++k) {
    double ms = 0;
    for (const Piece &piece : pieces)
      ms += piece.ms[k];
    if (k != 1 || !split_pieces.empty())
      timer.record(steps[k], ms);
  }

  out.variant_code_bytes.assign(variants, 0);
  for (size_t i = 0; i < pieces.size(); ++i)
    for (const std::string &object : pieces[i].objects)
      out.variant_code_bytes[i / nparts] += object.size();
  if (request.object)
    out.object = timer.run("link partitions", [&] {
      std::vector<std::string> objects;
      for (Piece &piece : pieces)
        for (std::string &object : piece.objects)
          objects.push_back(std::move(object));
      std::string code = objects.size() > 1
                             ? codegen::run_lld({"-r"}, objects, "the partitions of model '" + abi.name + "'")
                             : std::move(objects[0]);
      if (!request.external_weights)
        return codegen::append_weights_section(std::move(code), abi.name + ".weights.data", weights,
                                               ".rodata.maxc.weights", 64, early ? &object_head : nullptr);
      std::string hash(8, '\0'); // little-endian, as the code loads it
      for (int i = 0; i < 8; ++i)
        hash[i] = static_cast<char>(blob_checksum() >> (8 * i));
      return codegen::append_weights_section(std::move(code), abi.name + ".weights.checksum", ByteChunks(hash),
                                             ".rodata.maxc.weights_checksum", 8);
    });
  if (keep_ir) {
    // The partitions' optimized IR linked into one module: the assembly
    // and IR text of the whole model.
    llvm::LLVMContext context;
    std::vector<std::string> bitcode;
    for (Piece &piece : pieces)
      for (std::string &b : piece.bitcode)
        bitcode.push_back(std::move(b));
    std::unique_ptr<llvm::Module> module = timer.run("join ir", [&] { return join_bitcode(bitcode, context); });
    if (request.assembly)
      out.assembly = timer.run("emit asm", [&] { return emit_module(*module, targets[0], OutputKind::assembly); });
    if (request.llvm_ir)
      out.llvm_ir = timer.run("emit llvm-ir", [&] { return emit_module(*module, targets[0], OutputKind::llvm_ir); });
  }
  if (request.external_weights) {
    blob_checksum();
    out.weights_blob = std::move(weights);
  }
  wait_early();
  return out;
}

} // namespace maxc
