// Lowers a (decomposed) Graph and its subgraphs to LLVM functions.
//
// Every graph becomes
//   void @<prefix>.graph.<name>(ptr %buffers, ptr %dims, ptr %workspace)
//   i64  @<prefix>.workspace.<name>(ptr %dims)
// where %buffers holds one pointer per graph input then per output, %dims
// one i64 per symbolic dim (in `symbols` order), and %workspace the
// temporaries' memory (64-byte aligned). A subgraph is one function, called
// once per `call` node with that call's buffers: code size does not grow with
// the number of repeated layers.
//
// Inside a function, each kernel of the LoweringPlan is a loop nest over its
// output; values marked `fused` are recomputed inside the loops that read
// them, by the elemental emitters (one output element from operand elements,
// after XLA's elemental IR emitter).
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/IR/Graph.h"

#include <map>
#include <string>
#include <vector>

namespace llvm {
class Function;
class GlobalVariable;
class Module;
} // namespace llvm

namespace maxc::codegen {

struct EmittedGraph {
  llvm::Function *run = nullptr;
  llvm::Function *workspace_size = nullptr;
};

/// Constants outside the IR, at these byte offsets of the weights blob:
/// --weights-mode external, a blob the program provides at run time (its
/// base pointer in `base`); or, with `symbol` set, the object's weights
/// section, which the object writer defines `symbol` at (WeightsSection.h).
struct ExternalWeights {
  llvm::GlobalVariable *base = nullptr;
  llvm::GlobalVariable *symbol = nullptr;
  std::map<std::pair<const Graph *, std::string>, uint64_t> offsets;
};

struct PackedWeights; // Cpu/GemmPanels.h

/// Profile builds (maxc/Codegen/Profile.h): the counter of each kernel, an
/// element of `table` ([N x [3 x i64]]), by (graph, ProfiledKernel::node).
struct KernelCounters {
  llvm::GlobalVariable *table = nullptr;
  std::map<std::pair<const Graph *, size_t>, size_t> index;
};

/// `packed`: the GEMM weights stored packed in panel order (in the IR
/// constants or at `external`'s offsets), read as such; null: none.
EmittedGraph emit_graph_functions(llvm::Module &module, const Graph &root, const std::string &prefix,
                                  const std::vector<std::string> &symbols, unsigned vector_lanes = 16,
                                  unsigned int8_dot = 0, // Codegen/Target.h: cpu_int8_dot
                                  const ExternalWeights *external = nullptr,
                                  const LoweringPlans *plans = nullptr, // null: planned here
                                  const PackedWeights *packed = nullptr, const Graph *only = nullptr,
                                  const KernelCounters *profile = nullptr);
// `packed`: GEMM weights packed at compile time (Cpu/GemmPanels.h).
// `only` (root or one of its subgraphs): emits that graph's functions alone,
// declaring the others, every graph's as hidden globals: one partition of a
// model compiled in pieces (ModelCompiler.cpp, maxc compile --jobs).
// `profile`: brackets each kernel with the runtime's profile calls
// (Cpu/Runtime.h emit_profile_begin/end); null: none (the default build).

} // namespace maxc::codegen
