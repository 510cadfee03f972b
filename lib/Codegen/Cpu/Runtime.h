// The CPU artifact's runtime: the thread pool of RuntimePool.c (compiled to
// bitcode when maxc is built), linked into each model's module, and how
// generated code hands independent tasks to it.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace maxc::codegen {

/// Links the runtime into `module` (the model `name`): defines the exported
/// NAME_set_num_threads and NAME_set_parallel_for, and NAME.rt.* (internal),
/// among them NAME.rt.parallel_for, which emit_parallel_for calls. Call once,
/// after the kernels are emitted.
/// `profile`: the profile build's runtime (RuntimePool.c with
/// RuntimeProfile.c), which also defines NAME.rt.profile_{begin,end,run,
/// reset,report}. `triple`: the target's (whose spin-wait hint
/// NAME.rt.relax emits: x86 pause, aarch64 yield); empty: this host's (the
/// JIT). The module's own triple is set only when the object is written.
void link_cpu_runtime(llvm::Module &module, const std::string &name, bool profile = false,
                      const std::string &triple = {});

/// Profile builds: `t0 = NAME.rt.profile_begin()` before a kernel and
/// `NAME.rt.profile_end(counter, t0)` after it (`counter`: the kernel's
/// three int64 of the counter table, Codegen/Profile.h).
llvm::Value *emit_profile_begin(llvm::IRBuilder<> &b, const std::string &prefix);
void emit_profile_end(llvm::IRBuilder<> &b, const std::string &prefix, llvm::Value *counter, llvm::Value *t0);

/// void task(ptr ctx, i64 i): the signature of a task function.
llvm::FunctionType *task_function_type(llvm::LLVMContext &c);

/// Creates the internal, nounwind task function NAME of `m` with an "entry"
/// block that ends in a branch to an empty "body" block, and positions
/// `entry` before that branch (where the argument loads go: task_arg) and
/// `body` in the body block.
llvm::Function *create_task_function(llvm::Module &m, const std::string &name, llvm::IRBuilder<> &entry,
                                     llvm::IRBuilder<> &body);
/// Field `i` (of type `type`) of the task's argument struct `args` (of type
/// `st`), loaded at `entry`.
llvm::Value *task_arg(llvm::IRBuilder<> &entry, llvm::StructType *st, llvm::Value *args, unsigned i,
                      llvm::Type *type);
/// The caller's side: a task argument struct of type `st` (an alloca at the
/// entry of `b`'s function) with `fields` stored at `b`.
llvm::Value *emit_task_args(llvm::IRBuilder<> &b, llvm::StructType *st, const std::vector<llvm::Value *> &fields);

/// Emits `task(ctx, i)` for every i in [0, count): through the runtime's
/// parallel_for (the program's parallel-for, the built-in pool, or a loop)
/// when `count` > 1, else one direct call task(ctx, 0). Tasks must be
/// independent; which thread runs one must not change what it computes.
/// `work`: the whole job's estimated work (i64, about one multiply-add or
/// one element operation a unit; null: unknown): the built-in pool runs a
/// job below its threshold on the calling thread (RuntimePool.c:
/// MAXC_RT_MIN_WORK, up to MAXC_RT_FAR_MIN_WORK where hand-offs between
/// cores are measured slow; a program's own parallel-for gets every job).
void emit_parallel_for(llvm::IRBuilder<> &b, const std::string &prefix, llvm::Value *ctx, llvm::Value *count,
                       llvm::Function *task, llvm::Value *work);

} // namespace maxc::codegen
