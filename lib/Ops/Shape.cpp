#include "Families.h"
#include "OpHelpers.h"

namespace maxc {

void register_shape_ops(OpRegistry &registry) {}

} // namespace maxc
