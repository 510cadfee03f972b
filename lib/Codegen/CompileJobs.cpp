#include "maxc/Codegen/CompileJobs.h"

#include <llvm/Support/Signals.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace maxc::codegen {
namespace {

void no_crash_callback(void *) {}

/// LLVM installs its signal handlers the first time anything needs them
/// (LLD's output file asks to be removed on a signal) and, on that thread,
/// swaps in a malloc'd alternate signal stack. Done first on a helper thread,
/// that stack goes away with the thread: AddressSanitizer unmaps a thread's
/// alternate stack when the thread exits, and aborts when the unmap fails.
/// So the set-up happens once, here, on the thread that starts the helpers.
void install_llvm_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::sys::AddSignalHandler(no_crash_callback, nullptr); });
}

} // namespace

unsigned default_jobs() { return std::max(1u, std::thread::hardware_concurrency()); }

void run_jobs(size_t count, unsigned jobs, const std::function<void(size_t)> &task) {
  if (jobs == 0)
    jobs = default_jobs();
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // A task claimed (index taken) always runs, so every index below a
  // claimed one ran too: the lowest failure is the one a serial run meets.
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < count;) {
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
        failed.store(true);
      }
    }
  };
  std::vector<std::thread> threads;
  size_t helpers = std::min<size_t>(jobs, count);
  if (helpers > 1)
    install_llvm_signal_handlers();
  for (size_t t = 1; t < helpers; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error &) { // no more threads to be had: fewer do the work
      break;
    }
  }
  work();
  for (std::thread &t : threads)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
}

} // namespace maxc::codegen
