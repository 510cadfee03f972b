// Where a graph's temporaries live, apart from what an element is (XLA's
// buffer_assignment beside elemental_ir_emitter): the workspace layout of a
// LoweringPlan as LLVM values, asked by every host-side emitter (the CPU
// FunctionEmitter, the GPU HostGraphEmitter). And the run-time values of
// symbolic dims both need.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace maxc::codegen {

/// The values of symbolic dims in one function: each symbol loaded once
/// from the function's dims array (one i64 per symbol, in `symbols` order),
/// each polynomial (and min/max/floordiv atom) computed once, in the entry
/// block (`entry`), from Dim::terms(). A symbol that `table` says a node
/// defines is stored into the array by that node's kernel, mid-function:
/// it and every Dim naming it are loaded and computed where asked, at
/// `current`'s insertion point (each time; never cached in the entry).
/// Without a table (a task function, which runs after every definition it
/// reads, or a workspace-size function) every symbol is loaded in the entry.
class DimValues {
public:
  DimValues(llvm::IRBuilder<> &entry, llvm::Value *dims, const std::vector<std::string> &symbols,
            const SymbolTable *table = nullptr, llvm::IRBuilder<> *current = nullptr);
  llvm::Value *dims() const { return dims_; }
  llvm::Value *symbol(const std::string &name);
  llvm::Value *get(const Dim &d);
  /// The address of symbol `name`'s slot in the dims array, at `b`.
  llvm::Value *slot(llvm::IRBuilder<> &b, const std::string &name) const;
  /// True when no table was given: every symbol is loaded once, in the
  /// entry block, so nothing here may store one (a task function).
  bool symbols_fixed() const { return table_ == nullptr; }

private:
  /// True when `d` names a symbol a node defines.
  bool is_late(const Dim &d) const;
  llvm::Value *emit(llvm::IRBuilder<> &b, const Dim &d);

  llvm::IRBuilder<> &entry_;
  llvm::Value *dims_;
  const std::vector<std::string> &symbols_;
  const SymbolTable *table_;
  llvm::IRBuilder<> *current_;
  std::map<std::string, llvm::Value *> symbols_loaded_;
  std::map<Dim, llvm::Value *> polynomials_;
};

/// The dims array a call (`node`, a node of `caller`) runs its body on: the
/// caller's `dims` itself when the call binds no body symbol to another dim
/// (call_dim_binding, Ops/CallBinding.h: every call traced with its
/// operands' types), else a per-call copy — a stack array in `entry`'s
/// function, the caller's `symbols.size()` slots and the flag slot after
/// them copied at `b`, each bound symbol's slot set to the caller's value of
/// its dim (`dims_of`).
llvm::Value *call_dims_array(llvm::IRBuilder<> &b, llvm::IRBuilder<> &entry, llvm::Value *dims, const Graph &caller,
                             const Node &node, const std::vector<std::string> &symbols,
                             const std::function<llvm::Value *(const Dim &)> &dims_of);

/// After a call ran on the per-call copy `own` of `dims` (call_dims_array):
/// a defined symbol out of its bound inside the body raised the copy's flag
/// slot (index symbols.size()); raise the caller's too.
void merge_call_dims_flag(llvm::IRBuilder<> &b, llvm::Value *dims, llvm::Value *own, size_t symbols);

/// The workspace of one graph in one function: slots in plan order, each
/// rounded up to 64 bytes; offsets computed once, in the entry block.
class WorkspaceLayout {
public:
  WorkspaceLayout(const LoweringPlan &plan, DimValues &dims, llvm::IRBuilder<> &entry);
  /// Byte offset of workspace slot `slot`.
  llvm::Value *slot_offset(size_t slot);
  /// Where the slots end: a callee's workspace starts there.
  llvm::Value *slots_end();

  /// Fills `fn` (i64 (ptr dims)): graph g's slots plus the largest need of
  /// the subgraphs it calls (`callee_size` gives their size functions),
  /// each call with a binding on its per-call dims array.
  static void emit_size_function(llvm::Function *fn, const Graph &g, const LoweringPlan &plan,
                                 const std::vector<std::string> &symbols,
                                 const std::function<llvm::Function *(const Graph *)> &callee_size);

private:
  void lay_out();

  const LoweringPlan &plan_;
  DimValues &dims_;
  llvm::IRBuilder<> &entry_;
  std::vector<llvm::Value *> offsets_;
  llvm::Value *end_ = nullptr;
};

} // namespace maxc::codegen
