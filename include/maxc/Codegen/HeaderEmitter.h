// The C header of a compiled model, for every backend: plain C89/C99,
// usable from C++, documenting itself (shapes, dtypes, entry points), with
// one status-code table (ModelAbi's) emitted the same way everywhere:
// `#define NAME_OK 0`, `#define NAME_ERROR_...` (NAME upper-cased).
#pragma once

#include "maxc/Codegen/ModelAbi.h"

#include <string>
#include <vector>

namespace maxc {

/// The CPU backend's header (NAME_run with host pointers).
std::string emit_c_header(const ModelInterface &interface, const Dim &workspace_bound);

/// The GPU backends' header (NAME_init/NAME_run with a context, device
/// pointers and a stream) for the given architectures: HIP (gfx names,
/// NAME_hip_error) or, with `cuda`, the CUDA driver API (sm names,
/// NAME_cuda_error).
std::string emit_gpu_c_header(const ModelInterface &interface, const std::vector<std::string> &arches,
                              const Dim &workspace_bound, bool cuda = false);

} // namespace maxc
