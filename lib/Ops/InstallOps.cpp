// Installs the op registry as the node checker of Graph (lib/IR sits below
// lib/Ops and knows no op). Built as an object library that the aggregate
// `maxc` target hands to every program linking it, so it always runs before
// main(), even when the program references nothing else from lib/Ops.
#include "maxc/IR/Graph.h"
#include "maxc/Ops/OpRegistry.h"

namespace {
[[maybe_unused]] const bool installed = (maxc::set_node_inference(&maxc::infer_node), true);
} // namespace
