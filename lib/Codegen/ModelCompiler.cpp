#include "maxc/Codegen/ModelCompiler.h"

#include "KernelEmitter.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"
#include "maxc/Transforms/Decompose.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cctype>
#include <string_view>
#include <set>

namespace maxc {

bool is_c_identifier(const std::string &name) {
  static const std::set<std::string> keywords = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
      "true", "false", "class", "namespace", "template", "new", "delete", "this", "operator", "private", "public"};
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return !keywords.count(name);
}

// Input names may contain '.' or '-' ("h.0"); C needs identifiers.
static std::string c_name(const std::string &name, const std::string &fallback) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = fallback + (out.empty() ? "" : "_" + out);
  if (!is_c_identifier(out))
    out += "_";
  return out;
}

ModelInterface describe_interface(const Graph &graph, const std::string &name) {
  ModelInterface m;
  m.name = name;
  std::set<std::string> used;
  auto unique = [&](std::string n) {
    std::string candidate = n;
    for (int i = 2; !used.insert(candidate).second; ++i)
      candidate = n + "_" + std::to_string(i);
    return candidate;
  };
  for (size_t i = 0; i < graph.input_ids().size(); ++i) {
    ValueId id = graph.input_ids()[i];
    m.inputs.push_back({unique(c_name(graph.value_info(id).name, "input" + std::to_string(i))), graph.type_of(id)});
  }
  for (size_t i = 0; i < graph.output_ids().size(); ++i) {
    std::string n = i < graph.output_names().size() ? graph.output_names()[i] : "";
    m.outputs.push_back({unique(c_name(n, "output" + std::to_string(i))), graph.type_of(graph.output_ids()[i])});
  }
  m.symbols = codegen::collect_symbols(graph);
  for (const auto &[cname, data] : graph.constants())
    m.constant_bytes += data.nbytes();
  for (const auto &[sname, sub] : graph.subgraphs())
    for (const auto &[cname, data] : sub->constants())
      m.constant_bytes += data.nbytes();
  m.subgraph_definitions = graph.subgraphs().size();
  for (const Node &n : graph.nodes())
    m.subgraph_calls += n.op == "call";
  return m;
}

namespace codegen {

// Constants actually read by some node of `g` (decompose may leave the
// originals of pre-transposed weights unread).
static std::set<std::string> read_constants(const Graph &g) {
  std::vector<bool> used(g.num_values(), false);
  for (const Node &n : g.nodes())
    for (ValueId v : n.operands)
      used[v] = true;
  for (ValueId v : g.output_ids())
    used[v] = true;
  std::set<std::string> names;
  for (const Node &n : g.nodes())
    if (n.op == "constant" && used[n.results[0]])
      names.insert(n.attrs.get_string("name"));
  return names;
}

// The external weights blob: every read constant of the root graph, then of
// each subgraph, in name order, each 64-byte aligned.
std::string layout_constants(const Graph &lowered, std::map<std::pair<const Graph *, std::string>, uint64_t> &offsets) {
  std::string blob;
  auto add = [&](const Graph &g) {
    for (const std::string &name : read_constants(g)) {
      blob.resize((blob.size() + 63) & ~size_t(63), '\0');
      offsets[{&g, name}] = blob.size();
      const HostTensor &data = g.constant(name);
      blob.append(reinterpret_cast<const char *>(data.data()), data.nbytes());
    }
  };
  add(lowered);
  for (const auto &[name, sub] : lowered.subgraphs())
    add(*sub);
  return blob;
}

} // namespace codegen

namespace {

// if (cond) return status; — continuing after it otherwise.
void return_status_if(llvm::IRBuilder<> &b, llvm::Value *cond, RunStatus status) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  auto *bad = llvm::BasicBlock::Create(b.getContext(), "fail", fn);
  auto *ok = llvm::BasicBlock::Create(b.getContext(), "ok", fn);
  b.CreateCondBr(cond, bad, ok);
  b.SetInsertPoint(bad);
  b.CreateRet(b.getInt32(static_cast<int32_t>(status)));
  b.SetInsertPoint(ok);
}

// The exported C entry points around the root graph function.
void emit_entry_points(llvm::Module &module, const ModelInterface &m, codegen::EmittedGraph root,
                       llvm::GlobalVariable *weights_base) {
  llvm::LLVMContext &c = module.getContext();
  llvm::IRBuilder<> b(c);
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
    fail_if(b.CreateICmpEQ(buffers, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
    for (size_t i = 0; i < nbuf; ++i) {
      llvm::Value *p = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, buffers, i));
      fail_if(b.CreateICmpEQ(p, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
    }
    if (ndims) {
      fail_if(b.CreateICmpEQ(dims, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::null_pointer);
      for (size_t i = 0; i < ndims; ++i) {
        llvm::Value *d = b.CreateLoad(i64, b.CreateConstGEP1_64(i64, dims, i));
        // Dims are sizes: negative or absurd (> 2^40) values are rejected.
        fail_if(b.CreateICmpUGT(d, b.getInt64(int64_t(1) << 40)), RunStatus::invalid_dim);
      }
    }
    if (weights_base)
      fail_if(b.CreateICmpEQ(b.CreateLoad(ptr, weights_base), llvm::ConstantPointerNull::get(b.getPtrTy())),
              RunStatus::weights_not_set);
    auto *own = llvm::BasicBlock::Create(c, "own_workspace", packed);
    auto *given = llvm::BasicBlock::Create(c, "given_workspace", packed);
    b.CreateCondBr(b.CreateICmpEQ(ws, llvm::ConstantPointerNull::get(b.getPtrTy())), own, given);
    b.SetInsertPoint(given);
    b.CreateCall(root.run, {buffers, dims, ws});
    b.CreateRet(b.getInt32(0));
    b.SetInsertPoint(own);
    llvm::Value *size = b.CreateCall(root.workspace_size, {dims});
    llvm::Value *mem = b.CreateCall(malloc_fn, {b.CreateAdd(size, b.getInt64(64))});
    fail_if(b.CreateICmpEQ(mem, llvm::ConstantPointerNull::get(b.getPtrTy())), RunStatus::out_of_memory);
    // Align to 64 bytes by hand (malloc gives 16).
    llvm::Value *addr = b.CreatePtrToInt(mem, i64);
    llvm::Value *aligned = b.CreateAnd(b.CreateAdd(addr, b.getInt64(63)), b.getInt64(~int64_t(63)));
    b.CreateCall(root.run, {buffers, dims, b.CreateGEP(b.getInt8Ty(), mem, b.CreateSub(aligned, addr))});
    b.CreateCall(free_fn, {mem});
    b.CreateRet(b.getInt32(0));
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
    llvm::Value *dims = b.CreateAlloca(i64, b.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
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
    b.CreateRet(b.CreateCall(root.workspace_size, {dims}));
  }

  // NAME_set_parallel_for(fn): installs the caller's parallel-for, through
  // which large kernels run their independent tasks (NULL: run them inline).
  {
    auto *pf_global = llvm::cast<llvm::GlobalVariable>(module.getOrInsertGlobal(m.name + ".parallel_for", ptr));
    if (!pf_global->hasInitializer()) {
      pf_global->setLinkage(llvm::GlobalValue::InternalLinkage);
      pf_global->setInitializer(llvm::ConstantPointerNull::get(b.getPtrTy()));
    }
    auto *set_fn = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr}, false),
                                          llvm::GlobalValue::ExternalLinkage, m.name + "_set_parallel_for", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", set_fn));
    b.CreateStore(set_fn->getArg(0), pf_global);
    b.CreateRetVoid();
  }

  // NAME_set_weights(blob, size): external weights, checked by size,
  // alignment (64) and FNV-1a hash before they are used.
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
    // FNV-1a over the bytes.
    auto *pre = b.GetInsertBlock();
    auto *loop = llvm::BasicBlock::Create(c, "hash", fn);
    auto *body = llvm::BasicBlock::Create(c, "hash.body", fn);
    auto *done = llvm::BasicBlock::Create(c, "hash.done", fn);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode *i = b.CreatePHI(i64, 2), *h = b.CreatePHI(i64, 2);
    i->addIncoming(b.getInt64(0), pre);
    h->addIncoming(b.getInt64(static_cast<int64_t>(1469598103934665603ull)), pre);
    b.CreateCondBr(b.CreateICmpULT(i, size), body, done);
    b.SetInsertPoint(body);
    llvm::Value *byte = b.CreateZExt(b.CreateLoad(b.getInt8Ty(), b.CreateGEP(b.getInt8Ty(), blob, i)), i64);
    llvm::Value *next = b.CreateMul(b.CreateXor(h, byte), b.getInt64(static_cast<int64_t>(1099511628211ull)));
    h->addIncoming(next, body);
    i->addIncoming(b.CreateAdd(i, b.getInt64(1)), body);
    b.CreateBr(loop);
    b.SetInsertPoint(done);
    fail_if(b.CreateICmpNE(h, b.getInt64(static_cast<int64_t>(m.weights_blob_fnv1a))), RunStatus::weights_mismatch);
    b.CreateStore(blob, weights_base);
    b.CreateRet(b.getInt32(0));
  }

  // NAME_status_string(status)
  auto *status_fn = llvm::Function::Create(llvm::FunctionType::get(ptr, {i32}, false),
                                           llvm::GlobalValue::ExternalLinkage, m.name + "_status_string", module);
  {
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", status_fn));
    auto *unknown = llvm::BasicBlock::Create(c, "unknown", status_fn);
    auto *sw = b.CreateSwitch(status_fn->getArg(0), unknown, 6);
    const char *messages[] = {"ok",
                              "a buffer pointer is null",
                              "a dim value is negative or too large",
                              "out of memory for the workspace",
                              "weights are not set (call the model's _set_weights first)",
                              "the weights do not match this build (size, alignment or hash)"};
    for (int32_t s = 0; s < 6; ++s) {
      auto *bb = llvm::BasicBlock::Create(c, "status", status_fn);
      sw->addCase(b.getInt32(s), bb);
      b.SetInsertPoint(bb);
      b.CreateRet(b.CreateGlobalStringPtr(messages[s], m.name + ".status." + std::to_string(s), 0, &module));
    }
    b.SetInsertPoint(unknown);
    b.CreateRet(b.CreateGlobalStringPtr("unknown status", m.name + ".status.unknown", 0, &module));
  }
}

} // namespace

std::unique_ptr<llvm::Module> build_model_module(const Graph &graph, const std::string &name,
                                                 llvm::LLVMContext &context, std::string *external_weights_blob) {
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  std::unique_ptr<Graph> lowered = decompose(graph);
  ModelInterface m = describe_interface(*lowered, name);
  auto module = std::make_unique<llvm::Module>(name, context);
  std::unique_ptr<codegen::ExternalWeights> external;
  if (external_weights_blob) {
    external = std::make_unique<codegen::ExternalWeights>();
    *external_weights_blob = codegen::layout_constants(*lowered, external->offsets);
    external->base = new llvm::GlobalVariable(*module, llvm::PointerType::getUnqual(context), false,
                                              llvm::GlobalValue::InternalLinkage,
                                              llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(context)),
                                              name + ".weights");
    m.external_weights = true;
    m.weights_blob_bytes = external_weights_blob->size();
    m.weights_blob_fnv1a = fnv1a64(*external_weights_blob);
  }
  codegen::EmittedGraph root =
      codegen::emit_graph_functions(*module, *lowered, name, m.symbols, 16, external.get());
  emit_entry_points(*module, m, root, external ? external->base : nullptr);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*module, &os))
    throw Error(ErrorCode::Internal, "generated LLVM IR is invalid: " + os.str());
  return module;
}

CompiledModel compile_model(const Graph &graph, const CompileOptions &options, const EmitRequest &emit) {
  CompiledModel out;
  std::string name = options.name.empty() ? graph.name() : options.name;
  out.target = resolve_cpu_target(options.triple, options.cpu, options.opt_level);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      build_model_module(graph, name, context, options.external_weights ? &out.weights_blob : nullptr);
  optimize_module(*module, out.target);
  out.interface = describe_interface(graph, name);
  if (options.external_weights) {
    out.interface.external_weights = true;
    out.interface.weights_blob_bytes = out.weights_blob.size();
    out.interface.weights_blob_fnv1a = fnv1a64(out.weights_blob);
  }
  if (emit.object)
    out.object = emit_module(*module, out.target, OutputKind::object);
  if (emit.assembly)
    out.assembly = emit_module(*module, out.target, OutputKind::assembly);
  if (emit.llvm_ir)
    out.llvm_ir = emit_module(*module, out.target, OutputKind::llvm_ir);
  std::unique_ptr<Graph> lowered = decompose(graph);
  out.workspace_bound = workspace_bound(*lowered).to_string();
  out.kernels.push_back("main: " + std::to_string(plan_lowering(*lowered).kernels.size()) + " kernels");
  for (const auto &[sub_name, sub] : lowered->subgraphs())
    out.kernels.push_back("sub." + sub_name + ": " + std::to_string(plan_lowering(*sub).kernels.size()) + " kernels");
  out.header = emit_c_header(out.interface, out.workspace_bound);
  return out;
}

} // namespace maxc
