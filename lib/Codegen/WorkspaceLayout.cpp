#include "WorkspaceLayout.h"

#include <llvm/IR/Module.h>

#include <algorithm>
#include <cctype>
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
  std::string text = d.to_string();
  if (auto it = polynomials_.find(text); it != polynomials_.end())
    return it->second;
  // Dim keeps its terms private; rebuild them from the canonical text
  // ("2*batch*seq+seq-3"), which is exactly what Dim::parse accepts.
  Value *total = entry_.getInt64(0);
  size_t pos = 0;
  while (pos < text.size()) {
    bool negative = false;
    if (text[pos] == '+' || text[pos] == '-') {
      negative = text[pos] == '-';
      ++pos;
    }
    size_t end = text.find_first_of("+-", pos);
    if (end == std::string::npos)
      end = text.size();
    std::string term = text.substr(pos, end - pos);
    Value *product = entry_.getInt64(1);
    size_t start = 0;
    while (start <= term.size()) {
      size_t star = term.find('*', start);
      if (star == std::string::npos)
        star = term.size();
      std::string factor = term.substr(start, star - start);
      Value *f = std::isdigit(static_cast<unsigned char>(factor[0])) ? entry_.getInt64(std::stoll(factor))
                                                                      : symbol(factor);
      product = entry_.CreateMul(product, f);
      start = star + 1;
    }
    total = negative ? entry_.CreateSub(total, product) : entry_.CreateAdd(total, product);
    pos = end;
  }
  return polynomials_[text] = total;
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
