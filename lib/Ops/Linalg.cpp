#include "Families.h"
#include "OpHelpers.h"

namespace maxc {

void register_linalg_ops(OpRegistry &registry) {}

} // namespace maxc
