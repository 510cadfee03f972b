#include "Emulator/GpuEmulation.h"

#include "EntryPointUtil.h"
#include "Gpu/GpuHostEmitter.h"
#include "Gpu/GpuLowering.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Support/Error.h"
#include "Cpu/Runtime.h"
#include <llvm/IR/Module.h>

namespace maxc::codegen {

namespace {

/// A launch is a call of the kernel's emulation entry point.
class EmulationLauncher : public KernelLauncher {
public:
  EmulationLauncher(llvm::Module &m, std::string prefix) : m_(m), prefix_(std::move(prefix)) {}

  llvm::Value *launch(llvm::IRBuilder<> &b, const GpuKernel &kernel, size_t, llvm::Value *grid,
                      const std::vector<llvm::Value *> &buffers, llvm::Value *dims, llvm::Value *) override {
    llvm::Value *table = b.CreateAlloca(b.getPtrTy(), b.getInt64(static_cast<int64_t>(std::max<size_t>(buffers.size(), 1))));
    for (size_t i = 0; i < buffers.size(); ++i)
      b.CreateStore(buffers[i], b.CreateConstGEP1_64(b.getPtrTy(), table, i));
    b.CreateCall(m_.getFunction(emulation_entry_name(kernel)), {table, dims, grid});
    return b.getInt32(0);
  }

  /// Emulated device memory is host memory, and launches are calls.
  llvm::Value *copy_to_host(llvm::IRBuilder<> &b, llvm::Value *host, llvm::Value *device, uint64_t bytes,
                            llvm::Value *) override {
    b.CreateMemCpy(host, llvm::MaybeAlign(1), device, llvm::MaybeAlign(1), bytes);
    return b.getInt32(0);
  }

  llvm::Value *copy_to_device(llvm::IRBuilder<> &b, llvm::Value *device, llvm::Value *host, uint64_t bytes,
                              llvm::Value *) override {
    b.CreateMemCpy(device, llvm::MaybeAlign(1), host, llvm::MaybeAlign(1), bytes);
    return b.getInt32(0);
  }

  llvm::Value *copy_on_device(llvm::IRBuilder<> &b, llvm::Value *dst, llvm::Value *src, llvm::Value *bytes,
                              llvm::Value *) override {
    b.CreateMemMove(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), bytes);
    return b.getInt32(0);
  }

  /// A rank's collective: the CPU runtime's communicator (Cpu/RuntimePool.c,
  /// linked into the module with NAME_set_communicator), on host memory.
  llvm::Value *collective(llvm::IRBuilder<> &b, const Node &node, llvm::Value *in, llvm::Value *out,
                          llvm::Value *count, llvm::Value *outer, llvm::Value *chunk, llvm::Value *) override {
    llvm::Value *world = b.getInt32(static_cast<int32_t>(node.attrs.get_int("world")));
    llvm::Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty();
    if (node.op == "all_reduce") {
      b.CreateMemMove(out, llvm::MaybeAlign(4), in, llvm::MaybeAlign(4), b.CreateMul(count, b.getInt64(4)));
      b.CreateCall(m_.getOrInsertFunction(prefix_ + ".rt.all_reduce_f32", b.getVoidTy(), ptr, i64, b.getInt32Ty()),
                   {out, count, world});
    } else {
      b.CreateCall(m_.getOrInsertFunction(prefix_ + ".rt.all_gather", b.getVoidTy(), ptr, ptr, i64, i64, b.getInt32Ty()),
                   {in, out, outer, chunk, world});
    }
    llvm::Value *failed = b.CreateCall(m_.getOrInsertFunction(prefix_ + ".rt.take_comm_status", b.getInt32Ty()));
    return b.CreateSelect(b.CreateICmpNE(failed, b.getInt32(0)), b.getInt32(static_cast<int32_t>(RunStatus::collective)),
                          b.getInt32(0));
  }

private:
  llvm::Module &m_;
  std::string prefix_;
};

} // namespace

std::unique_ptr<llvm::Module> build_gpu_emulation_module(const Graph &lowered, const std::string &name,
                                                         llvm::LLVMContext &context, const std::string &arch,
                                                         const LoweringPlans *plans) {
  ModelInterface abi = describe_interface(lowered, name);
  if (abi.state && plans) // NAME_run_packed's dims check (a model with state)
    abi.workspace_bound = workspace_bound(lowered, plans);
  std::vector<std::string> symbols = abi.dims_array();
  auto module = std::make_unique<llvm::Module>(name, context);
  ConstantOffsets offsets;
  std::string blob = layout_constants(lowered, offsets);

  std::vector<GpuGraphProgram> programs = emit_gpu_kernels(*module, lowered, name, symbols, arch, plans);
  lower_gpu_kernels(*module, programs, GpuLoweringTarget::emulation, symbols.size());
  for (const GpuGraphProgram &p : programs) // the emulator runs a rank's collectives in f32 (as the CPU)
    for (const GpuGraphProgram::Item &item : p.items)
      if (item.call && item.call->op == "all_reduce" && p.graph->type_of(item.call->operands[0]).dtype != DType::f32)
        throw Error(ErrorCode::InvalidGraph, "all_reduce of " + p.graph->type_of(item.call->operands[0]).to_string() +
                                                 ": the GPU emulator sums f32 only");
  EmulationLauncher launcher(*module, name);
  GpuHostGraph root = emit_gpu_host(*module, programs, name, symbols, offsets, launcher);

  // The weights, embedded; the context is just their address.
  llvm::IRBuilder<> b(context);
  auto *bytes = llvm::ConstantDataArray::getRaw(blob, blob.size(), b.getInt8Ty());
  auto *weights = new llvm::GlobalVariable(*module, bytes->getType(), true, llvm::GlobalValue::InternalLinkage, bytes,
                                           name + ".weights");
  weights->setAlignment(llvm::Align(64));
  llvm::Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty();
  auto *fn = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, ptr}, false),
                                    llvm::GlobalValue::ExternalLinkage, name + "_run_packed", *module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", fn));
  llvm::Value *context_struct = b.CreateAlloca(ptr);
  b.CreateStore(weights, context_struct);
  llvm::Value *ws = fn->getArg(2);
  if (abi.state) { // sizes, and the appended rows must fit the buffers, as the artifacts check
    return_if(b, dims_invalid(b, fn->getArg(1), abi.symbols, abi.workspace_bound),
              b.getInt32(static_cast<int32_t>(RunStatus::invalid_dim)));
    return_if(b, state_overflows(b, fn->getArg(1), abi.symbols, *abi.state),
              b.getInt32(static_cast<int32_t>(RunStatus::state_full)));
  }
  llvm::Value *dims = graph_dims_array(b, fn->getArg(1), abi.symbols.size(), abi.internal_dims());
  auto report = [&] { // the defined symbols an output's size names, back to the caller
    if (reports_defined_symbols(abi))
      (void)defined_symbols_failed(b, dims, fn->getArg(1), abi.symbols.size(), abi.internal_dims(),
                                   abi.defined_symbols.size(), true);
  };
  auto *own = llvm::BasicBlock::Create(context, "own_workspace", fn);
  auto *given = llvm::BasicBlock::Create(context, "given_workspace", fn);
  b.CreateCondBr(b.CreateICmpEQ(ws, llvm::ConstantPointerNull::get(b.getPtrTy())), own, given);
  b.SetInsertPoint(given);
  llvm::Value *given_status = b.CreateCall(root.run, {fn->getArg(0), dims, ws, context_struct});
  report();
  b.CreateRet(given_status);
  b.SetInsertPoint(own);
  llvm::FunctionCallee malloc_fn = module->getOrInsertFunction("malloc", ptr, i64);
  llvm::FunctionCallee free_fn = module->getOrInsertFunction("free", b.getVoidTy(), ptr);
  llvm::Value *size = b.CreateCall(root.workspace_size, {dims});
  llvm::Value *mem = b.CreateCall(malloc_fn, {b.CreateAdd(size, b.getInt64(64))});
  return_if(b, b.CreateICmpEQ(mem, llvm::ConstantPointerNull::get(b.getPtrTy())),
            b.getInt32(static_cast<int32_t>(RunStatus::out_of_memory)));
  llvm::Value *status = b.CreateCall(root.run, {fn->getArg(0), dims, align_to_64(b, mem), context_struct});
  b.CreateCall(free_fn, {mem});
  report();
  b.CreateRet(status);

  if (abi.state) { // the state API, as the artifacts have it, on host memory
    size_t ndims = abi.symbols.size();
    auto *size_fn = llvm::Function::Create(llvm::FunctionType::get(i64, std::vector<llvm::Type *>(ndims, i64), false),
                                           llvm::GlobalValue::ExternalLinkage, name + "_workspace_size", *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", size_fn));
    llvm::Value *values = b.CreateAlloca(i64, b.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
    for (size_t i = 0; i < ndims; ++i)
      b.CreateStore(size_fn->getArg(static_cast<unsigned>(i)), b.CreateConstGEP1_64(i64, values, i));
    return_if(b, dims_invalid(b, values, abi.symbols, abi.workspace_bound), b.getInt64(-1));
    b.CreateRet(b.CreateCall(root.workspace_size, {graph_dims_array(b, values, ndims, abi.internal_dims())}));
    HostStateTarget state(fn);
    emit_state_entry_points(*module, abi, size_fn, state);
  }
  if (abi.world > 0) // a rank's program: the communicator (NAME_set_communicator) with the CPU's runtime
    link_cpu_runtime(*module, name, false, "");
  verify_module(*module, "GPU emulation");
  return module;
}

} // namespace maxc::codegen
