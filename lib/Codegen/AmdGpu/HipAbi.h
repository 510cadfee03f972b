// The one fact of the HIP runtime's ABI the generated host code needs
// besides function signatures: where hipGetDeviceProperties() puts
// gcnArchName ("gfx90a:sramecc+:xnack-"). The exported symbol fills the
// pre-R0600 hipDeviceProp_t (792 bytes) in ROCm 5, 6 and 7; ROCm 6+
// headers redefine the call to hipGetDevicePropertiesR0600 with another
// layout, so the offset is pinned here, not read from whatever headers
// maxc is built with (HipAbi.cpp checks it against ROCm 5 headers).
#pragma once

#include <cstddef>

namespace maxc::codegen {

constexpr size_t kHipDevicePropR0000Bytes = 792;
constexpr size_t kHipGcnArchNameOffsetR0000 = 396;

} // namespace maxc::codegen
