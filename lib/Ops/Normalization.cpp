#include "Families.h"
#include "OpHelpers.h"

namespace maxc {

void register_normalization_ops(OpRegistry &registry) {}

} // namespace maxc
