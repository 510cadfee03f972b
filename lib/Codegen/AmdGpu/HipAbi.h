// The two facts of the HIP runtime's ABI the generated host code needs,
// read from the ROCm headers maxc is built with: hipGetDeviceProperties()
// fills a hipDeviceProp_t (the pre-R0600 layout, which ROCm 6 keeps under
// that symbol), whose gcnArchName ("gfx90a:sramecc+:xnack-") picks the
// code object.
#pragma once

#include <cstddef>

namespace maxc::codegen {

size_t hip_device_prop_size();
size_t hip_gcn_arch_name_offset();

} // namespace maxc::codegen
