// Per-call dims: a call binds its body's own symbols to the caller's dims.
//
// A body (a subgraph a `call` node invokes) is usually traced with its
// operands' exact types, so its symbols are the caller's and every call
// binds each to itself. A body traced with types of its own (CallOptions::
// arg_types: "[m, 8]" where the calls pass [seq, 8], [2*seq, 8] and [3, 8])
// is one function for every call: each call binds the body's bare-symbol
// input dims to its operands' dims (m := 2*seq), the call's results are the
// body's outputs with the binding substituted, the reference interpreter
// binds m from the operands, and the code generators run the body on a
// copy of the caller's dims array with m's slot set to the caller's value
// (per-call dims arrays; docs/DESIGN.md "Per-call dims").
#pragma once

#include "maxc/IR/Graph.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {

/// A body's symbols, each bound to a dim of the caller.
using DimBinding = std::map<std::string, Dim>;

/// What a call of `body` with operands of types `operands` binds: each
/// bare-symbol dim of the body's inputs to the operand's dim at that place
/// (the same symbol twice must get the same dim), every other dim equal to
/// the operand's after substitution, dtypes and ranks equal. Throws
/// maxc::Error (ShapeMismatch / OperandCount) naming `what`.
DimBinding bind_body_inputs(const Graph &body, const std::vector<TensorType> &operands, const std::string &what);

/// `binding` without its entries that bind a symbol to itself.
DimBinding without_identities(DimBinding binding);

/// The part of a call's binding that is not the identity (empty for a call
/// traced with its operands' types, and for a node that is not a call):
/// the slots a per-call dims array overrides.
DimBinding call_dim_binding(const Graph &caller, const Node &node);

/// Every symbol some call of the model (a node of `root` or of a body it
/// reaches) binds to another dim, sorted: a body's own dims. They are no
/// parameters of the artifact; the compiled functions' dims array has a
/// slot for each (ModelInterface::call_symbols). A binding whose dims name
/// such a symbol themselves (a body with dims of its own calling one with
/// dims of its own, bound through them) is refused (InvalidGraph).
std::vector<std::string> call_bound_symbols(const Graph &root);

} // namespace maxc
