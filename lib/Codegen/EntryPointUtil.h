// IR helpers every backend's entry points share: verifying a generated
// module, returning a status early, and the "no workspace given: allocate
// one, aligned to 64" sequence.
#pragma once

#include "maxc/Codegen/ModelAbi.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>

namespace llvm {
class Module;
}

namespace maxc::codegen {

/// Throws maxc::Error (Internal) naming `what` when `module` is invalid IR
/// (invalid IR makes LLVM's passes crash or abort: check it first).
void verify_module(const llvm::Module &module, const std::string &what);

/// if (cond) { cleanup(); return status; } — continuing after it otherwise.
void return_if(llvm::IRBuilder<> &b, llvm::Value *cond, llvm::Value *status,
               const std::function<void()> &cleanup = {});

/// i1, true when NAME_run must report INVALID_DIM for the dims in `dims`
/// (an i64 per symbol): a dim negative or above 2^40, or the workspace
/// bound `bound` (bytes, a Dim over the symbols) overflowing int64 (or
/// dividing by a divisor that is not positive). NAME_workspace_size returns
/// -1 for the same dims.
llvm::Value *dims_invalid(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                          const Dim &bound);

/// The value of `d`, built term by term in Dim::terms() order: each term is
/// 1 * |coeff| (where the coefficient prints, as in to_string) * its atoms,
/// added to or subtracted from a total starting at 0; Dim(0) is the single
/// term 0. `mul` and `add_sub` build the arithmetic (plain or checked),
/// `atom` the value of each atom.
llvm::Value *emit_dim(llvm::IRBuilder<> &b, const Dim &d, const std::function<llvm::Value *(const DimAtom &)> &atom,
                      const std::function<llvm::Value *(llvm::Value *, llvm::Value *)> &mul,
                      const std::function<llvm::Value *(llvm::Value *, llvm::Value *, bool subtract)> &add_sub);

/// A derived atom (min, max, floordiv; Dim.h) from the values of its
/// operands (`operand`); floordiv rounds toward -inf for a positive divisor
/// (Dim's contract: sdiv by 0 traps. dims_invalid flags a non-positive
/// divisor in the workspace bound; other uses rely on the contract).
llvm::Value *emit_derived_atom(llvm::IRBuilder<> &b, const DimAtom &atom,
                               const std::function<llvm::Value *(const Dim &)> &operand);

/// The value of `d` (a Dim over `symbols`, plain arithmetic) from `dims`
/// (an i64 per symbol).
llvm::Value *emit_dims_value(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                             const Dim &d);

/// i1, true when a run of a model with state would append past its
/// buffers: length + advance > capacity (ModelState), from `dims`.
llvm::Value *state_overflows(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                             const ModelState &state);

/// Where a model state's memory lives and how NAME_step runs the model:
/// host memory and NAME_run_packed on the CPU, device memory and a context
/// of the model's own (NAME_init) on a GPU runtime.
class StateTarget {
public:
  virtual ~StateTarget() = default;
  /// Declares the runtime functions the hooks call (after calloc, before
  /// free: the declarations' order is the object's symbols').
  virtual void declare(llvm::Module &module) = 0;
  /// A state buffer of `bytes` bytes (64-byte aligned), or null.
  virtual llvm::Value *alloc_buffer(llvm::IRBuilder<> &b, llvm::Value *bytes) = 0;
  /// Zeroes buffer `p`; an i1 true on failure, or null when it cannot fail.
  virtual llvm::Value *zero(llvm::IRBuilder<> &b, llvm::Value *p, llvm::Value *bytes) = 0;
  /// A workspace of `bytes` bytes (aligned by the caller), or null.
  virtual llvm::Value *alloc_workspace(llvm::IRBuilder<> &b, llvm::Value *bytes) = 0;
  /// Frees a buffer or the workspace (null: nothing).
  virtual void release(llvm::IRBuilder<> &b, llvm::Value *p) = 0;
  /// A GPU: each state holds a context (a field after the buffers).
  virtual bool has_context() const { return false; }
  /// A new context, or null on failure (has_context only).
  virtual llvm::Value *open_context(llvm::IRBuilder<> &) { return nullptr; }
  /// Makes `ctx` current before device memory is touched (CUDA), and
  /// destroys it (null: nothing).
  virtual void enter_context(llvm::IRBuilder<> &, llvm::Value *) {}
  virtual void close_context(llvm::IRBuilder<> &, llvm::Value *) {}
  /// NAME_run_packed on the state's buffers: an i32 status. A null
  /// `workspace` only on the path that reports invalid dims or a full state.
  virtual llvm::Value *run(llvm::IRBuilder<> &b, llvm::Value *ctx, llvm::Value *buffers, llvm::Value *dims,
                           llvm::Value *workspace) = 0;
};

/// The state's memory in the host's: buffers from aligned_alloc (zeroed), a
/// malloc'd workspace, and `packed` (NAME_run_packed(buffers, dims,
/// workspace)) runs a step: the CPU artifact, and the GPU emulation.
class HostStateTarget : public StateTarget {
public:
  explicit HostStateTarget(llvm::Function *packed) : packed_(packed) {}
  void declare(llvm::Module &module) override;
  llvm::Value *alloc_buffer(llvm::IRBuilder<> &b, llvm::Value *bytes) override;
  llvm::Value *zero(llvm::IRBuilder<> &b, llvm::Value *p, llvm::Value *bytes) override;
  llvm::Value *alloc_workspace(llvm::IRBuilder<> &b, llvm::Value *bytes) override;
  void release(llvm::IRBuilder<> &b, llvm::Value *p) override;
  llvm::Value *run(llvm::IRBuilder<> &b, llvm::Value *ctx, llvm::Value *buffers, llvm::Value *dims,
                   llvm::Value *workspace) override;

private:
  llvm::Function *packed_;
  llvm::Module *module_ = nullptr;
  llvm::FunctionCallee aligned_alloc_, malloc_;
};

/// The state API of a model with state (ModelInterface::state; the header's
/// declarations: emit_c_header): NAME_state_create/destroy/reset/length/
/// capacity and NAME_step, around `size_fn` (NAME_workspace_size). The
/// state object (calloc'd): { i64 capacity, i64 length, ptr workspace (not
/// aligned), i64 its usable bytes, ptr buffers[n] (zeroed)[, ptr context] }.
void emit_state_entry_points(llvm::Module &module, const ModelInterface &m, llvm::Function *size_fn,
                             StateTarget &target);

/// `mem` (from an allocator giving `size + 64` bytes) rounded up to 64.
llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem);

/// The value a node defining a symbol stores (CPU kernel and GPU host
/// alike): integer `v` widened to i64 by its signedness and clamped to
/// [0, bound], the bound its buffers are sized by. `out_of_bound`, when not
/// null, receives an i1: v was outside [0, bound] (the run must fail with
/// INVALID_DIM; the clamp only keeps the kernels after it in bounds).
llvm::Value *clamp_symbol_value(llvm::IRBuilder<> &b, llvm::Value *v, bool is_signed, int64_t bound,
                                llvm::Value **out_of_bound = nullptr);

/// The graph functions' dims array from an entry point's `dims` (`params`
/// i64s, the C dims): `dims` itself when no symbol is defined by a node or
/// bound per call, else a zeroed stack array of params + `internal` slots
/// (ModelInterface::internal_dims) holding a copy of them (the kernels
/// defining symbols store theirs after, calls set theirs in copies), and
/// one slot more, at index params + internal: the CPU kernels set it to 1
/// when a defined symbol's value was outside its bound
/// (`defined_symbols_failed`).
llvm::Value *graph_dims_array(llvm::IRBuilder<> &b, llvm::Value *dims, size_t params, size_t internal);

/// After the graph ran on the dims array `own` (graph_dims_array's, with
/// `internal` > 0 slots after the `params`, the first `defined` of them the
/// symbols nodes define): copies the defined symbols' values into the
/// caller's `dims` after its `params` values when `copy_back` (an output's
/// size names them; the caller's array then holds params + defined values),
/// and returns an i1: a defined symbol's value was outside its bound (the
/// flag slot the CPU kernels set).
llvm::Value *defined_symbols_failed(llvm::IRBuilder<> &b, llvm::Value *own, llvm::Value *dims, size_t params,
                                    size_t internal, size_t defined, bool copy_back);

/// for (i = 0; i < n; ++i) body(i), an i64 counter from 0 (named `counter`;
/// `no_wrap`: the increment is nuw nsw), blocks PREFIX"loop", "body",
/// "exit". Leaves the builder at the exit; returns the latch (the back
/// edge), where loop metadata goes.
llvm::BranchInst *emit_counted_loop(llvm::IRBuilder<> &b, llvm::Value *n, const std::function<void(llvm::Value *)> &body,
                                    const std::string &prefix = "", const std::string &counter = "",
                                    bool no_wrap = false);

/// Loop metadata on a latch: llvm.loop.unroll.count `unroll` (1:
/// llvm.loop.unroll.disable; 0: nothing).
/// if (cond) then(); continuing after it either way (at `b`'s insertion
/// point; `b` is left after it).
void emit_if(llvm::IRBuilder<> &b, llvm::Value *cond, const std::function<void()> &then);

void set_loop_unroll(llvm::BranchInst *latch, unsigned unroll);

/// A `loop` node's scratch (LoweringPlan.h's loop_scratch_bytes, at
/// `scratch`) as the CPU and the GPU host code use it: the iteration number,
/// the condition the body reads and the one it writes (kLoopScalarBytes
/// each), then the second set of carried values (`spare[k]`, 64-byte
/// aligned, `bytes[k]` each at the current dims; `dim` gives a Dim's value).
struct LoopCells {
  llvm::Value *iter = nullptr, *cond_in = nullptr, *cond_out = nullptr;
  std::vector<llvm::Value *> spare, bytes;
  /// Stores the body's buffer table of one iteration into `table`: its
  /// inputs (the iteration number, the condition, the carried values,
  /// `captures`), then its outputs (the condition, the carried values). The
  /// carried values alternate by parity: `results` in, `spare` out when
  /// `odd` is false, the other way round when true.
  void store_table(llvm::IRBuilder<> &b, llvm::Value *table, llvm::Value *odd,
                   const std::vector<llvm::Value *> &results, const std::vector<llvm::Value *> &captures) const;
  /// The number of entries store_table writes.
  static size_t table_size(const Node &node) { return node.operands.size() + 1 + node.results.size(); }
};
LoopCells loop_cells(llvm::IRBuilder<> &b, const Graph &graph, const Node &node, llvm::Value *scratch,
                     const std::function<llvm::Value *(const Dim &)> &dim);

} // namespace maxc::codegen
