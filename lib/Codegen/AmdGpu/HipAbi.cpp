// Checks the pinned pre-R0600 layout (HipAbi.h) against the HIP headers
// when they are the ones that define it (ROCm 5; Debian 12 ships 5.2).
#include "AmdGpu/HipAbi.h"

#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>

#if HIP_VERSION_MAJOR < 6
static_assert(sizeof(hipDeviceProp_t) == maxc::codegen::kHipDevicePropR0000Bytes,
              "hipDeviceProp_t (pre-R0600) changed size");
static_assert(offsetof(hipDeviceProp_t, gcnArchName) == maxc::codegen::kHipGcnArchNameOffsetR0000,
              "gcnArchName moved in the pre-R0600 hipDeviceProp_t");
#endif
