// The CPU artifact's runtime: the thread pool of RuntimePool.c (compiled to
// bitcode when maxc is built), linked into each model's module, and how
// generated code hands independent tasks to it.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <string>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace maxc::codegen {

/// Links the runtime into `module` (the model `name`): defines the exported
/// NAME_set_num_threads and NAME_set_parallel_for, and NAME.rt.* (internal),
/// among them NAME.rt.parallel_for, which emit_parallel_for calls. Call once,
/// after the kernels are emitted.
void link_cpu_runtime(llvm::Module &module, const std::string &name);

/// void task(ptr ctx, i64 i): the signature of a task function.
llvm::FunctionType *task_function_type(llvm::LLVMContext &c);

/// Emits `task(ctx, i)` for every i in [0, count): through the runtime's
/// parallel_for (the program's parallel-for, the built-in pool, or a loop)
/// when `count` > 1, else one direct call task(ctx, 0). Tasks must be
/// independent; which thread runs one must not change what it computes.
void emit_parallel_for(llvm::IRBuilder<> &b, const std::string &prefix, llvm::Value *ctx, llvm::Value *count,
                       llvm::Function *task);

} // namespace maxc::codegen
