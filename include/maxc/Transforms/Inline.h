// Inlining: a subgraph definition called from one place in the whole model
// is pasted into its caller, the root graph.
//
// A call boundary costs fusion: the callee's first kernel reads its
// arguments back from memory and its last kernel writes its results out,
// and every pass that looks through a value's producer (an activation into
// the conv before it, a sigmoid into the mul that reads it, a quantize into
// the conv after it) stops at the call. A definition several calls share is
// what dedup is for and stays a call; one called once saves nothing. The
// common source is the ONNX importer's structural blocks: copies that repeat
// op by op but differ in shapes (a detector's stages at each resolution)
// trace to distinct definitions of one call each.
//
// A call is inlined when it is in the root graph; its callee is called
// nowhere else (in any graph) and is no other op's body (an `if` branch,
// a `loop` body); the callee's input and result types are the call's
// operand and result types (no per-call dim binding, CallBinding.h); and no
// node of the callee defines a symbol. The callee's nodes keep their
// attributes and debug names; its own constants join the root's (under
// their names, made unique as Graph::add_constant does). The definition
// leaves the subgraph table. Bit-exact: the same nodes on the same values.
#pragma once

#include "maxc/IR/Graph.h"

#include <cstddef>
#include <memory>

namespace maxc {

/// `graph` with every call its callee's only call inlined (see above), or
/// null when there is none. `inlined`, when given, gets the number of calls
/// inlined.
std::unique_ptr<Graph> inline_single_calls(const Graph &graph, size_t *inlined = nullptr);

} // namespace maxc
