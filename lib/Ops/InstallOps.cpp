// Installs the op registry as the node checker of Graph and as the source of
// each op's body attributes (lib/IR sits below lib/Ops and knows no op).
// Built as an object library that the aggregate `maxc` target hands to every
// program linking it, so it always runs before main(), even when the program
// references nothing else from lib/Ops.
#include "maxc/IR/Graph.h"
#include "maxc/Ops/OpRegistry.h"

namespace {
const std::vector<std::string> *op_body_attributes(const std::string &op) {
  const maxc::OpDef *def = maxc::OpRegistry::instance().find(op);
  return def && def->has_bodies() ? &def->body_attrs : nullptr;
}
[[maybe_unused]] const bool installed =
    (maxc::set_node_inference(&maxc::infer_node), maxc::set_body_attributes(&op_body_attributes), true);
} // namespace
