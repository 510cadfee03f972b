#include "Families.h"
#include "OpHelpers.h"

namespace maxc {

void register_convolution_ops(OpRegistry &registry) {}

} // namespace maxc
