#include "Gpu/GpuHostEmitter.h"

#include "EntryPointUtil.h"
#include "WorkspaceLayout.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Module.h>

#include <array>
#include <memory>

namespace maxc::codegen {

using llvm::Value;

namespace {

// The launch sequence of one graph. It asks the WorkspaceLayout where
// temporaries live and DimValues what the dims are; what an element is
// (ElementalEmitter) is the kernels' business, not the host's.
class HostGraphEmitter {
public:
  HostGraphEmitter(llvm::Module &module, const GpuGraphProgram &program, const std::vector<std::string> &symbols,
                   const ConstantOffsets &offsets, KernelLauncher &launcher,
                   const std::map<const Graph *, GpuHostGraph> &functions, size_t first_kernel)
      : ctx_(module.getContext()), g_(*program.graph), plan_(program.plan), symbols_(symbols), b_(ctx_),
        entry_b_(ctx_), program_(program), offsets_(offsets), launcher_(launcher), functions_(functions),
        first_kernel_(first_kernel) {}

  void emit(GpuHostGraph fns) {
    WorkspaceLayout::emit_size_function(fns.workspace_size, g_, plan_, symbols_,
                                        [&](const Graph *callee) { return functions_.at(callee).workspace_size; });
    llvm::Function *fn = fns.run;
    buffers_ = fn->getArg(0);
    dims_ = fn->getArg(1);
    workspace_ = fn->getArg(2);
    context_ = fn->getArg(3);
    auto *entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
    auto *body = llvm::BasicBlock::Create(ctx_, "body", fn);
    entry_b_.SetInsertPoint(entry);
    entry_b_.SetInsertPoint(entry_b_.CreateBr(body));
    b_.SetInsertPoint(body);
    dim_values_ = std::make_unique<DimValues>(entry_b_, dims_, symbols_, &g_.root()->symbol_table(), &b_);
    layout_ = std::make_unique<WorkspaceLayout>(plan_, *dim_values_, entry_b_);
    for (const GpuGraphProgram::Item &item : program_.items) {
      if (item.call && is_branch(*item.call))
        emit_branch(*item.call);
      else if (item.call && is_loop(*item.call))
        emit_loop(*item.call);
      else if (item.call && defines_symbol(*item.call))
        emit_define_symbol(*item.call);
      else if (item.call && op_traits(item.call->op).has(OpTrait::communicates))
        fail_if_nonzero(emit_collective(*item.call));
      else if (item.call)
        fail_if_nonzero(emit_call(*item.call));
      else
        emit_launch(program_.kernels[item.kernel], first_kernel_ + item.kernel);
    }
    b_.CreateRet(b_.getInt32(0));
  }

private:
  Value *dim(const Dim &d) { return d.is_static() ? b_.getInt64(d.value()) : dim_values_->get(d); }

  Value *pointer_of(ValueId v) {
    const ValuePlan &p = plan_.values[v];
    switch (p.storage) {
    case Storage::input: return buffer_arg(p.index);
    case Storage::output: return buffer_arg(g_.input_ids().size() + p.index);
    case Storage::temp: return entry_b_.CreateGEP(entry_b_.getInt8Ty(), workspace_, layout_->slot_offset(p.index));
    case Storage::constant: {
      const Node &n = g_.nodes()[g_.value_info(v).producer];
      auto it = offsets_.find({&g_, n.attrs.get_string("name")});
      if (it == offsets_.end())
        throw Error(ErrorCode::Internal, "gpu codegen: constant '" + n.attrs.get_string("name") + "' has no offset");
      if (!weights_)
        weights_ = entry_b_.CreateLoad(entry_b_.getPtrTy(), context_);
      return entry_b_.CreateGEP(entry_b_.getInt8Ty(), weights_, entry_b_.getInt64(static_cast<int64_t>(it->second)));
    }
    case Storage::fused: break;
    }
    throw Error(ErrorCode::Internal, "gpu codegen: value %" + std::to_string(v) + " has no storage");
  }

  Value *buffer_arg(size_t index) {
    if (auto it = buffer_args_.find(index); it != buffer_args_.end())
      return it->second;
    Value *at = entry_b_.CreateConstGEP1_64(entry_b_.getPtrTy(), buffers_, index);
    return buffer_args_[index] = entry_b_.CreateLoad(entry_b_.getPtrTy(), at);
  }

  void fail_if_nonzero(Value *status) {
    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    auto *bad = llvm::BasicBlock::Create(ctx_, "failed", fn);
    auto *ok = llvm::BasicBlock::Create(ctx_, "ok", fn);
    b_.CreateCondBr(b_.CreateICmpNE(status, b_.getInt32(0)), bad, ok);
    b_.SetInsertPoint(bad);
    b_.CreateRet(status);
    b_.SetInsertPoint(ok);
  }

  // all_reduce / all_gather between launches: the launcher's collective.
  Value *emit_collective(const Node &node) {
    ValueId x = node.operands[0];
    const Shape &shape = g_.type_of(x).shape;
    int64_t axis = node.op == "all_gather" ? node.attrs.get_int("axis") : 0;
    Value *count = b_.getInt64(1), *outer = b_.getInt64(1),
          *chunk = b_.getInt64(static_cast<int64_t>(dtype_size(g_.type_of(x).dtype)));
    for (size_t a = 0; a < shape.size(); ++a) {
      count = b_.CreateMul(count, dim(shape[a]));
      if (static_cast<int64_t>(a) < axis)
        outer = b_.CreateMul(outer, dim(shape[a]));
      else
        chunk = b_.CreateMul(chunk, dim(shape[a]));
    }
    return launcher_.collective(b_, node, pointer_of(x), pointer_of(node.results[0]), count, outer, chunk, context_);
  }

  void emit_launch(const GpuKernel &k, size_t index) {
    Value *grid = b_.getInt64(1);
    for (const GridFactor &f : k.grid) {
      Value *e = dim(f.extent);
      if (f.divisor != 1)
        e = b_.CreateUDiv(b_.CreateAdd(e, b_.getInt64(f.divisor - 1)), b_.getInt64(f.divisor));
      grid = b_.CreateMul(grid, e);
    }
    std::vector<Value *> pointers;
    for (const KernelBuffer &buffer : k.buffers)
      pointers.push_back(buffer.output >= 0 ? buffer_arg(g_.input_ids().size() + buffer.output)
                                            : pointer_of(buffer.value));
    // An empty tensor launches nothing (zero workgroups is an error in HIP).
    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    auto *run = llvm::BasicBlock::Create(ctx_, "launch", fn);
    auto *done = llvm::BasicBlock::Create(ctx_, "launched", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(grid, b_.getInt64(0)), done, run);
    b_.SetInsertPoint(run);
    fail_if_nonzero(launcher_.launch(b_, k, index, grid, pointers, dims_, context_));
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  /// A call; one binding the body's own dims runs it on a per-call dims array.
  Value *emit_call(const Node &node) {
    Value *dims = call_dims_array(b_, entry_b_, dims_, g_, node, symbols_, [&](const Dim &d) { return dim(d); });
    return emit_body_call(call_body(g_, node), node.operands, node.results, dims);
  }

  /// A branch: its predicate copied to the host, then the taken body's
  /// launch sequence with the captures and results as its buffers.
  void emit_branch(const Node &node) {
    std::array<const Graph *, 2> bodies = branch_bodies(g_, node);
    if (!bodies[0] || !bodies[1])
      throw Error(ErrorCode::Internal, "gpu codegen: a branch names no subgraph");
    ValueId pred = node.operands[0];
    auto bytes = static_cast<uint64_t>(dtype_size(g_.type_of(pred).dtype));
    llvm::Type *type = b_.getIntNTy(static_cast<unsigned>(bytes * 8));
    Value *host = entry_b_.CreateAlloca(type);
    fail_if_nonzero(launcher_.copy_to_host(b_, host, pointer_of(pred), bytes, context_));
    Value *taken = b_.CreateICmpNE(b_.CreateLoad(type, host), llvm::ConstantInt::get(type, 0));
    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    auto *then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn);
    auto *else_bb = llvm::BasicBlock::Create(ctx_, "if.else", fn);
    auto *done = llvm::BasicBlock::Create(ctx_, "if.done", fn);
    b_.CreateCondBr(taken, then_bb, else_bb);
    std::vector<ValueId> captures(node.operands.begin() + kBranchFirstInput, node.operands.end());
    for (int i = 0; i < 2; ++i) {
      b_.SetInsertPoint(i == 0 ? then_bb : else_bb);
      fail_if_nonzero(emit_body_call(bodies[i], captures, node.results, dims_));
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  /// A loop, as the CPU runs it (KernelEmitter::emit_loop): the carried
  /// values alternate between the results' buffers and a second set in the
  /// plan's scratch slot (device memory), beside the iteration number and
  /// the condition the body reads. The loop itself runs on the host: the
  /// trip count and each condition are copied to the host, the iteration
  /// number and the condition to the device before each body's launch
  /// sequence.
  void emit_loop(const Node &node) {
    const Graph *body = loop_body(g_, node);
    if (!body)
      throw Error(ErrorCode::Internal, "gpu codegen: a loop names no subgraph");
    llvm::Type *i8 = b_.getInt8Ty(), *i64 = b_.getInt64Ty();
    const size_t carried = node.results.size();
    Value *scratch = b_.CreateGEP(i8, workspace_, layout_->slot_offset(plan_.scratch_slot));
    LoopCells cells = loop_cells(b_, g_, node, scratch, [&](const Dim &d) { return dim(d); });
    Value *iter_cell = cells.iter, *cond_in = cells.cond_in, *cond_out = cells.cond_out;
    const std::vector<Value *> &spare = cells.spare, &bytes = cells.bytes;
    std::vector<Value *> results;
    for (size_t k = 0; k < carried; ++k) {
      results.push_back(pointer_of(node.results[k]));
      fail_if_nonzero(launcher_.copy_on_device(b_, results[k], pointer_of(node.operands[kLoopFirstCarried + k]),
                                               bytes[k], context_));
    }
    // A scalar of `dtype` at device address `device`, on the host: nonzero?
    Value *host = entry_b_.CreateAlloca(i64);
    auto truth = [&](DType dtype, Value *device) {
      auto width = static_cast<unsigned>(dtype_size(dtype) * 8);
      fail_if_nonzero(launcher_.copy_to_host(b_, host, device, dtype_size(dtype), context_));
      Value *x = b_.CreateLoad(b_.getIntNTy(width), host);
      return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    };
    DType trip_type = g_.type_of(node.operands[0]).dtype;
    fail_if_nonzero(launcher_.copy_to_host(b_, host, pointer_of(node.operands[0]), dtype_size(trip_type), context_));
    Value *trip = b_.CreateLoad(b_.getIntNTy(static_cast<unsigned>(dtype_size(trip_type) * 8)), host);
    trip = is_signed(trip_type) ? b_.CreateSExt(trip, i64) : b_.CreateZExt(trip, i64);
    Value *cond0 = truth(g_.type_of(node.operands[1]).dtype, pointer_of(node.operands[1]));
    Value *table = entry_b_.CreateAlloca(b_.getPtrTy(), entry_b_.getInt64(static_cast<int64_t>(LoopCells::table_size(node))));
    Value *host_cond = entry_b_.CreateAlloca(i8);

    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    auto *head = llvm::BasicBlock::Create(ctx_, "loop.head", fn);
    auto *step = llvm::BasicBlock::Create(ctx_, "loop.body", fn);
    auto *done = llvm::BasicBlock::Create(ctx_, "loop.done", fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode *i = b_.CreatePHI(i64, 2, "iter");
    llvm::PHINode *cond = b_.CreatePHI(b_.getInt1Ty(), 2, "cond");
    i->addIncoming(b_.getInt64(0), pre);
    cond->addIncoming(cond0, pre);
    b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSLT(i, trip), cond), step, done);

    b_.SetInsertPoint(step);
    b_.CreateStore(i, host);
    fail_if_nonzero(launcher_.copy_to_device(b_, iter_cell, host, 8, context_));
    b_.CreateStore(b_.getInt8(1), host_cond); // the body runs only while the condition holds
    fail_if_nonzero(launcher_.copy_to_device(b_, cond_in, host_cond, 1, context_));
    std::vector<Value *> captures;
    for (size_t c = kLoopFirstCarried + carried; c < node.operands.size(); ++c)
      captures.push_back(pointer_of(node.operands[c]));
    cells.store_table(b_, table, b_.CreateTrunc(i, b_.getInt1Ty()), results, captures);
    Value *callee_ws = b_.CreateGEP(i8, workspace_, layout_->slots_end());
    fail_if_nonzero(b_.CreateCall(functions_.at(body).run, {table, dims_, callee_ws, context_}));
    Value *next = truth(body->type_of(body->output_ids()[0]).dtype, cond_out);
    i->addIncoming(b_.CreateAdd(i, b_.getInt64(1)), b_.GetInsertBlock());
    cond->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);

    // After an odd number of iterations the last values are in the spare set.
    b_.SetInsertPoint(done);
    auto *back = llvm::BasicBlock::Create(ctx_, "loop.copy_back", fn);
    auto *out = llvm::BasicBlock::Create(ctx_, "loop.out", fn);
    b_.CreateCondBr(b_.CreateTrunc(i, b_.getInt1Ty()), back, out);
    b_.SetInsertPoint(back);
    for (size_t k = 0; k < carried; ++k)
      fail_if_nonzero(launcher_.copy_on_device(b_, results[k], spare[k], bytes[k], context_));
    b_.CreateBr(out);
    b_.SetInsertPoint(out);
  }

  /// A node defining a symbol: its operand copied to the host, clamped to
  /// [0, its bound] (as the CPU does) and stored into the symbol's slot of
  /// the dims array, which the launches after it read. Its i64 result is
  /// not stored on the device: a launch that reads it would need a copy
  /// back, and nothing records one (gpu codegen refuses such a graph).
  void emit_define_symbol(const Node &node) {
    ValueId x = node.operands[0];
    DType dt = g_.type_of(x).dtype;
    auto bytes = static_cast<uint64_t>(dtype_size(dt));
    llvm::Type *type = b_.getIntNTy(static_cast<unsigned>(bytes * 8));
    Value *host = entry_b_.CreateAlloca(type);
    fail_if_nonzero(launcher_.copy_to_host(b_, host, pointer_of(x), bytes, context_));
    Value *out_of_bound = nullptr;
    Value *v = clamp_symbol_value(b_, b_.CreateLoad(type, host), is_signed(dt),
                                  g_.root()->symbol_table().upper_bound(defined_symbol(node)).value(), &out_of_bound);
    // A value outside its bound fails the run (INVALID_DIM) before any
    // kernel sized by it runs, in any body (a body's status is its
    // caller's: emit_body_call).
    fail_if_nonzero(b_.CreateSelect(out_of_bound, b_.getInt32(static_cast<int32_t>(RunStatus::invalid_dim)),
                                    b_.getInt32(0)));
    b_.CreateStore(v, dim_values_->slot(b_, defined_symbol(node)));
  }

  /// Calls `callee`'s host function with `args`, then `results`, as its
  /// buffers, in the workspace after this graph's slots.
  Value *emit_body_call(const Graph *callee, const std::vector<ValueId> &args, const std::vector<ValueId> &results,
                        Value *dims) {
    std::vector<ValueId> buffers(args.begin(), args.end());
    buffers.insert(buffers.end(), results.begin(), results.end());
    Value *table = entry_b_.CreateAlloca(b_.getPtrTy(), entry_b_.getInt64(static_cast<int64_t>(std::max<size_t>(buffers.size(), 1))));
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (plan_.values[buffers[i]].storage == Storage::fused)
        throw Error(ErrorCode::Internal, "gpu codegen: call operand %" + std::to_string(buffers[i]) + " is not stored");
      b_.CreateStore(pointer_of(buffers[i]), b_.CreateConstGEP1_64(b_.getPtrTy(), table, i));
    }
    Value *callee_ws = b_.CreateGEP(b_.getInt8Ty(), workspace_, layout_->slots_end());
    return b_.CreateCall(functions_.at(callee).run, {table, dims, callee_ws, context_});
  }

  llvm::LLVMContext &ctx_;
  const Graph &g_;
  const LoweringPlan &plan_;
  const std::vector<std::string> &symbols_;
  llvm::IRBuilder<> b_, entry_b_; // the current insertion point; the entry block
  const GpuGraphProgram &program_;
  const ConstantOffsets &offsets_;
  KernelLauncher &launcher_;
  const std::map<const Graph *, GpuHostGraph> &functions_;
  size_t first_kernel_;
  Value *buffers_ = nullptr, *dims_ = nullptr, *workspace_ = nullptr, *context_ = nullptr, *weights_ = nullptr;
  std::unique_ptr<DimValues> dim_values_;
  std::unique_ptr<WorkspaceLayout> layout_;
  std::map<size_t, Value *> buffer_args_;
};

} // namespace

Value *KernelLauncher::collective(llvm::IRBuilder<> &, const Node &node, Value *, Value *, Value *, Value *, Value *,
                                  Value *) {
  throw Error(ErrorCode::InvalidArgument, "'" + node.op + "': a tensor-parallel rank's program runs on the CPU and on "
                                          "the GPU emulator; GPU collectives (NCCL/RCCL) are not implemented yet "
                                          "(docs/tensor-parallel.md)");
}

GpuHostGraph emit_gpu_host(llvm::Module &module, const std::vector<GpuGraphProgram> &programs,
                           const std::string &prefix, const std::vector<std::string> &symbols,
                           const ConstantOffsets &offsets, KernelLauncher &launcher) {
  llvm::LLVMContext &c = module.getContext();
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *run_type = llvm::FunctionType::get(llvm::Type::getInt32Ty(c), {ptr, ptr, ptr, ptr}, false);
  auto *size_type = llvm::FunctionType::get(llvm::Type::getInt64Ty(c), {ptr}, false);
  std::map<const Graph *, GpuHostGraph> functions;
  for (const GpuGraphProgram &p : programs) {
    GpuHostGraph fns;
    fns.run = llvm::Function::Create(run_type, llvm::GlobalValue::InternalLinkage, prefix + ".gpu." + p.tag, module);
    fns.workspace_size = llvm::Function::Create(size_type, llvm::GlobalValue::InternalLinkage,
                                                prefix + ".gpu.workspace." + p.tag, module);
    fns.run->addFnAttr(llvm::Attribute::NoUnwind);
    fns.workspace_size->addFnAttr(llvm::Attribute::NoUnwind);
    functions[p.graph] = fns;
  }
  size_t first = 0;
  for (const GpuGraphProgram &p : programs) {
    HostGraphEmitter(module, p, symbols, offsets, launcher, functions, first).emit(functions.at(p.graph));
    first += p.kernels.size();
  }
  return functions.at(programs.back().graph);
}

} // namespace maxc::codegen
