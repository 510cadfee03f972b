// A task on a second thread where one can be had: std::async with
// std::launch::async, and when the system refuses a thread
// (std::system_error), the same task deferred — run by whoever first waits
// for its result. Callers get one future either way.
//
// async_background is the same for work that runs beside the compile's own
// (digests and weights written while LLVM generates code): its thread runs
// at a lower priority (BackgroundPriority), so that it takes the cores the
// code generation leaves idle instead of sharing them with it.
#pragma once

#include <future>
#include <system_error>
#include <type_traits>
#include <utility>

namespace maxc {

template <class F> std::future<std::invoke_result_t<std::decay_t<F>>> async_or_deferred(F &&task) {
  try {
    return std::async(std::launch::async, task); // a copy: `task` stays for the fallback
  } catch (const std::system_error &) {
    return std::async(std::launch::deferred, std::forward<F>(task));
  }
}

/// Lowers the calling thread's priority below the process's (Linux; a no-op
/// elsewhere or where the system refuses): under SCHED_FIFO/SCHED_RR one
/// real-time priority lower (SCHED_OTHER below priority 1), under
/// SCHED_OTHER/SCHED_BATCH nice +10. Threads it then creates inherit it.
/// Best effort: the bytes computed never depend on it.
void lower_thread_priority();

/// async_or_deferred, the thread at lower_thread_priority (a deferred task
/// runs in its waiter at the waiter's priority).
template <class F> std::future<std::invoke_result_t<std::decay_t<F>>> async_background(F &&task) {
  auto lowered = [task]() mutable {
    lower_thread_priority();
    return task();
  };
  try {
    return std::async(std::launch::async, std::move(lowered));
  } catch (const std::system_error &) {
    return std::async(std::launch::deferred, std::forward<F>(task));
  }
}

} // namespace maxc
