// Compile jobs on worker threads (maxc compile --jobs N): independent pieces
// of code generation (a CPU model's partitions, a GPU arch's code object)
// run on up to N threads. Each task writes only its own result slot, so what
// is produced does not depend on N or on which thread ran which task.
#pragma once

#include <cstddef>
#include <functional>

namespace maxc::codegen {

/// The default of --jobs: the hardware threads (1 when unknown).
unsigned default_jobs();

/// Runs task(i) for every i in [0, count) on up to `jobs` threads, the
/// caller's among them (0 = default_jobs(); 1 = in order on this thread).
/// Tasks are started in index order; once one has failed no new one starts,
/// and after the running ones finish the exception of the lowest failed
/// index is rethrown: the same one whatever `jobs` is.
void run_jobs(size_t count, unsigned jobs, const std::function<void(size_t)> &task);

} // namespace maxc::codegen
