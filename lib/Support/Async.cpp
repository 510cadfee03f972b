#include "maxc/Support/Async.h"

#include <algorithm>

#ifdef __linux__
#include <cerrno>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace maxc {

void lower_thread_priority() {
#ifdef __linux__
  // Linux schedules threads: pid 0 / the tid here name the calling thread only.
  int policy = sched_getscheduler(0);
  if (policy == SCHED_FIFO || policy == SCHED_RR) {
    sched_param param{};
    if (sched_getparam(0, &param) != 0)
      return;
    if (param.sched_priority > sched_get_priority_min(policy)) {
      --param.sched_priority;
      sched_setscheduler(0, policy, &param);
    } else {
      param.sched_priority = 0;
      sched_setscheduler(0, SCHED_OTHER, &param);
    }
    return;
  }
  pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  errno = 0;
  int now = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (now == -1 && errno != 0)
    return;
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), std::min(19, now + 10));
#endif
}

} // namespace maxc
