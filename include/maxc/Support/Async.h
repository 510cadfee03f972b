// A task on a second thread where one can be had: std::async with
// std::launch::async, and when the system refuses a thread
// (std::system_error), the same task deferred — run by whoever first waits
// for its result. Callers get one future either way.
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

} // namespace maxc
