#include "WorkspaceLayout.h"

#include "EntryPointUtil.h"

#include "maxc/Ops/CallBinding.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Module.h>

#include <algorithm>
#include <set>

namespace maxc::codegen {

using llvm::Value;

DimValues::DimValues(llvm::IRBuilder<> &entry, Value *dims, const std::vector<std::string> &symbols,
                     const SymbolTable *table, llvm::IRBuilder<> *current)
    : entry_(entry), dims_(dims), symbols_(symbols), table_(table), current_(current) {}

Value *DimValues::slot(llvm::IRBuilder<> &b, const std::string &name) const {
  auto pos = std::find(symbols_.begin(), symbols_.end(), name);
  if (pos == symbols_.end())
    throw Error(ErrorCode::Internal, "codegen: symbol '" + name + "' has no slot in the dims array");
  return b.CreateConstGEP1_64(b.getInt64Ty(), dims_, static_cast<uint64_t>(pos - symbols_.begin()));
}

bool DimValues::is_late(const Dim &d) const {
  if (!table_)
    return false;
  for (const std::string &name : d.symbols())
    if (const SymbolInfo *info = table_->find(name); info && info->origin == SymbolOrigin::NodeResult)
      return true;
  return false;
}

Value *DimValues::symbol(const std::string &name) {
  if (is_late(Dim(name))) {
    if (!current_)
      throw Error(ErrorCode::Internal, "codegen: '" + name + "' (defined by a node) is read where no kernel runs");
    return current_->CreateLoad(current_->getInt64Ty(), slot(*current_, name), name);
  }
  if (auto it = symbols_loaded_.find(name); it != symbols_loaded_.end())
    return it->second;
  return symbols_loaded_[name] = entry_.CreateLoad(entry_.getInt64Ty(), slot(entry_, name), name);
}

Value *DimValues::emit(llvm::IRBuilder<> &b, const Dim &d) {
  return emit_dim(
      b, d,
      [&](const DimAtom &a) {
        return a.is_symbol() ? symbol(a.symbol()) : emit_derived_atom(b, a, [&](const Dim &x) { return get(x); });
      },
      [&](Value *x, Value *y) { return b.CreateMul(x, y); },
      [&](Value *x, Value *y, bool subtract) { return subtract ? b.CreateSub(x, y) : b.CreateAdd(x, y); });
}

Value *DimValues::get(const Dim &d) {
  if (d.is_static())
    return entry_.getInt64(d.value());
  if (is_late(d)) {
    if (!current_)
      throw Error(ErrorCode::Internal, "codegen: '" + d.to_string() + "' (defined by a node) is read where no kernel runs");
    return emit(*current_, d);
  }
  if (auto it = polynomials_.find(d); it != polynomials_.end())
    return it->second;
  return polynomials_[d] = emit(entry_, d);
}

WorkspaceLayout::WorkspaceLayout(const LoweringPlan &plan, DimValues &dims, llvm::IRBuilder<> &entry)
    : plan_(plan), dims_(dims), entry_(entry) {}

void WorkspaceLayout::lay_out() {
  if (end_)
    return;
  Value *offset = entry_.getInt64(0);
  for (const WorkspaceSlot &s : plan_.slots) {
    offsets_.push_back(offset);
    offset = entry_.CreateAnd(entry_.CreateAdd(offset, entry_.CreateAdd(dims_.get(s.bytes), entry_.getInt64(63))),
                              entry_.getInt64(~int64_t(63)));
  }
  end_ = offset;
}

Value *WorkspaceLayout::slot_offset(size_t slot) {
  lay_out();
  return offsets_.at(slot);
}

Value *WorkspaceLayout::slots_end() {
  lay_out();
  return end_;
}

void WorkspaceLayout::emit_size_function(llvm::Function *fn, const Graph &g, const LoweringPlan &plan,
                                         const std::vector<std::string> &symbols,
                                         const std::function<llvm::Function *(const Graph *)> &callee_size) {
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(fn->getContext(), "entry", fn));
  DimValues dims(b, fn->getArg(0), symbols);
  WorkspaceLayout layout(plan, dims, b);
  Value *total = layout.slots_end();
  Value *callees = b.getInt64(0);
  std::set<const Graph *> seen;
  for (const Node &n : g.nodes())
    for (const Graph *callee : node_bodies(g, n)) {
      // A call binding the body's own dims needs its size at those dims.
      Value *call_dims = call_dims_array(b, b, fn->getArg(0), g, n, symbols, [&](const Dim &d) { return dims.get(d); });
      if (call_dims == fn->getArg(0) && !seen.insert(callee).second)
        continue;
      Value *need = b.CreateCall(callee_size(callee), {call_dims});
      callees = b.CreateSelect(b.CreateICmpUGT(need, callees), need, callees);
    }
  b.CreateRet(b.CreateAdd(total, callees));
}

Value *call_dims_array(llvm::IRBuilder<> &b, llvm::IRBuilder<> &entry, Value *dims, const Graph &caller,
                       const Node &node, const std::vector<std::string> &symbols,
                       const std::function<Value *(const Dim &)> &dims_of) {
  DimBinding binding = call_dim_binding(caller, node);
  if (binding.empty())
    return dims;
  size_t slots = symbols.size() + 1; // the flag after the symbols (graph_dims_array)
  Value *own = entry.CreateAlloca(b.getInt64Ty(), entry.getInt64(static_cast<int64_t>(slots)));
  b.CreateMemCpy(own, llvm::MaybeAlign(8), dims, llvm::MaybeAlign(8), slots * 8);
  for (const auto &[symbol, dim] : binding) {
    auto pos = std::find(symbols.begin(), symbols.end(), symbol);
    if (pos == symbols.end())
      throw Error(ErrorCode::Internal, "codegen: the call-bound symbol '" + symbol + "' has no slot in the dims array");
    b.CreateStore(dims_of(dim), b.CreateConstGEP1_64(b.getInt64Ty(), own, static_cast<uint64_t>(pos - symbols.begin())));
  }
  return own;
}

void merge_call_dims_flag(llvm::IRBuilder<> &b, Value *dims, Value *own, size_t symbols) {
  if (own == dims)
    return;
  Value *flag = b.CreateConstGEP1_64(b.getInt64Ty(), dims, symbols);
  Value *theirs = b.CreateLoad(b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), own, symbols));
  b.CreateStore(b.CreateOr(b.CreateLoad(b.getInt64Ty(), flag), theirs), flag);
}

} // namespace maxc::codegen
