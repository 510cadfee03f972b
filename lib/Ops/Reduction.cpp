#include "Families.h"
#include "OpHelpers.h"

namespace maxc {

void register_reduction_ops(OpRegistry &registry) {}

} // namespace maxc
