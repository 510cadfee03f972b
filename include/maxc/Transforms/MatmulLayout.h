// Matmul operand layout, applied during decompose(): a transposed operand
// (transpose_a / transpose_b, and linear's [out, in] weights) becomes an
// explicit transpose, so the code generator only sees row-major matmuls
// (its GEMM kernel streams rows of B). Transposes of graph constants are
// folded at compile time — weights are stored pre-transposed, once — and
// others become a packing copy at run time (O(K·N) next to O(M·K·N)).
//
// Subgraph parameters get the same treatment as root constants: an input of
// a subgraph definition that every call site binds to a constant and that
// the body reads through a transposed-matmul use arrives pre-transposed
// (plan_call_site_layout). Each call site passes the transposed constant
// (stored once per instance, named "<weight>.T" like a root constant's, so a
// weight transposed for the root and for a call is stored once) and the
// definition stays one function, with no transposes of its weights.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {

/// Inputs of subgraph definitions that arrive with their last two dims
/// swapped. `replaces`: the body reads the input only through transposed
/// uses, so the transposed input takes its place (same position); else the
/// original stays and the transposed one is appended after all inputs.
struct PretransposedInput {
  size_t index = 0;
  bool replaces = true;
};
struct CallSiteLayout {
  std::map<std::string, std::vector<PretransposedInput>> inputs; // by subgraph name
};

/// Finds, for every subgraph definition of `root`, the inputs that can
/// arrive pre-transposed: bound to a constant at every call (all calls in the
/// root graph, at least one) and read by at least one transposed matmul
/// operand (linear's weight, matmul's transpose_a lhs / transpose_b rhs).
CallSiteLayout plan_call_site_layout(const Graph &root);

/// Row-major operands for one graph being rebuilt into `ctx`'s graph.
class MatmulLayout {
public:
  MatmulLayout(const Graph &from, GraphRealizationContext &ctx) : from_(from), ctx_(ctx) {}

  /// `from`'s value `id` (a subgraph input) arrives transposed as `value`.
  void set_pretransposed(ValueId id, const Tensor &value) { pretransposed_[id] = value; }

  /// `operand` (the rebuilt value of `from`'s `id`) with its last two dims
  /// swapped: the pre-transposed input, a constant transposed at compile
  /// time (once per constant, and once for constants with identical
  /// bytes), or a transpose recorded into the graph.
  Tensor transposed(ValueId id, const Tensor &operand);

  /// If `node` (of `from`) is a matmul with a transposed operand, records the
  /// row-major equivalent and returns its result; else returns {}.
  std::vector<Tensor> rewrite_matmul(const Node &node, const std::vector<Tensor> &operands);

  /// If `node` is a call of a subgraph with pre-transposed inputs (`layout`),
  /// records it with the transposed constants passed; else returns {}.
  std::vector<Tensor> rewrite_call(const Node &node, const std::vector<Tensor> &operands,
                                   const CallSiteLayout &layout);

private:
  const Graph &from_;
  GraphRealizationContext &ctx_;
  std::map<ValueId, Tensor> pretransposed_;
  std::map<std::string, Tensor> constants_;                             // transposed, by original name
  std::multimap<size_t, std::pair<const HostTensor *, Tensor>> by_bytes_; // transposed, by hash of the original
};

/// The type of a value with its last two dims swapped.
TensorType transposed_type(const TensorType &type);

} // namespace maxc
