#include "AmdGpu/HipAbi.h"

#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>

#include <cstddef>

namespace maxc::codegen {

size_t hip_device_prop_size() { return sizeof(hipDeviceProp_t); }
size_t hip_gcn_arch_name_offset() { return offsetof(hipDeviceProp_t, gcnArchName); }

} // namespace maxc::codegen
