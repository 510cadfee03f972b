#include "WorkspaceLayout.h"

#include "EntryPointUtil.h"

#include <llvm/IR/Module.h>

#include <algorithm>
#include <set>

namespace maxc::codegen {

using llvm::Value;

DimValues::DimValues(llvm::IRBuilder<> &entry, Value *dims, const std::vector<std::string> &symbols)
    : entry_(entry), dims_(dims), symbols_(symbols) {}

Value *DimValues::symbol(const std::string &name) {
  if (auto it = symbols_loaded_.find(name); it != symbols_loaded_.end())
    return it->second;
  auto pos = std::find(symbols_.begin(), symbols_.end(), name);
  size_t index = static_cast<size_t>(pos - symbols_.begin());
  Value *ptr = entry_.CreateConstGEP1_64(entry_.getInt64Ty(), dims_, index);
  return symbols_loaded_[name] = entry_.CreateLoad(entry_.getInt64Ty(), ptr, name);
}

Value *DimValues::get(const Dim &d) {
  if (d.is_static())
    return entry_.getInt64(d.value());
  if (auto it = polynomials_.find(d); it != polynomials_.end())
    return it->second;
  Value *total = emit_dim(
      entry_, d,
      [&](const DimAtom &a) {
        return a.is_symbol() ? symbol(a.symbol()) : emit_derived_atom(entry_, a, [&](const Dim &x) { return get(x); });
      },
      [&](Value *x, Value *y) { return entry_.CreateMul(x, y); },
      [&](Value *x, Value *y, bool subtract) { return subtract ? entry_.CreateSub(x, y) : entry_.CreateAdd(x, y); });
  return polynomials_[d] = total;
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
      if (!seen.insert(callee).second)
        continue;
      Value *need = b.CreateCall(callee_size(callee), {fn->getArg(0)});
      callees = b.CreateSelect(b.CreateICmpUGT(need, callees), need, callees);
    }
  b.CreateRet(b.CreateAdd(total, callees));
}

} // namespace maxc::codegen
