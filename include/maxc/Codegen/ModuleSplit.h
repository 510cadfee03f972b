// Splitting one big LLVM module into pieces that are optimized and emitted
// on several threads: a model without subgraphs (or with large ones) is
// otherwise one module compiled on one core.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace maxc::codegen {

/// How many pieces split_module makes of `module`: one per
/// kSplitInstructions IR instructions (rounded down), at least 1 and at
/// most kMaxSplitPieces. Depends on the module only, never on the number of
/// threads, so the object's bytes do not either.
unsigned split_piece_count(const llvm::Module &module);
/// The IR instructions of `module`'s function definitions.
size_t instruction_count(const llvm::Module &module);
inline constexpr size_t kSplitInstructions = 10000;
inline constexpr unsigned kMaxSplitPieces = 8;

/// Splits `module` (built, not yet optimized) into `pieces` modules, each
/// returned as bitcode, that together define what `module` defines and link
/// (LLD -r) into one object:
/// - a function called from outside, or whose address is taken (a kernel's
///   task, a graph function), or marked noinline, is defined in one piece,
///   the pieces balanced by instruction count (largest first, each to the
///   lightest piece; ties in module order); an internal one becomes a
///   hidden global named `prefix` + its name;
/// - an internal function only ever called directly (a helper the optimizer
///   inlines) is copied, still internal, into every piece that calls it;
/// - a small internal constant without relocations is copied likewise; any
///   other global variable is defined in piece 0 (hidden, renamed as above).
/// So each piece is optimized as it would have been in the whole module:
/// what the inliner and constant folding see in one function is there.
/// Returns {} (leaving `module` as it was) when it cannot be split: fewer
/// than two functions to place, or aliases, ifuncs, comdats, appending
/// globals or module asm. `prefix` must make the renamed symbols unique in
/// the linked object (e.g. "model.part3.").
std::vector<std::string> split_module(llvm::Module &module, unsigned pieces, const std::string &prefix);

} // namespace maxc::codegen
