/* The artifact's thread pool (lib/Codegen/Cpu/RuntimePool.c) on its own:
 * how much of a parallel call's work a second thread takes when the calls
 * come GAP microseconds apart (the serial kernels between a model's parallel
 * ones). Each call runs TASKS tasks of TASK_US microseconds (busy waits).
 * Not a test; meaningful only on an otherwise idle machine.
 *
 *   cc -O2 -std=c11 bench/pool_bench.c lib/Codegen/Cpu/RuntimePool.c -lpthread -o /tmp/pool_bench
 *   /tmp/pool_bench [GAP_US [TASKS [TASK_US [THREADS]]]]      (defaults 100 8 10 2)
 *
 * Another pool (e.g. main's) for comparison:
 *   git show main:lib/Codegen/Cpu/RuntimePool.c > /tmp/pool_old.c
 *   cc -O2 -std=c11 bench/pool_bench.c /tmp/pool_old.c -lpthread -o /tmp/pool_bench_old */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void maxc_rt_set_num_threads(int32_t n);
void maxc_rt_parallel_for(void *ctx, int64_t count, void (*task)(void *, int64_t), int64_t work);
/* The spin-wait hint that maxc links into each artifact (Cpu/Runtime.cpp). */
void maxc_rt_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static void busy_us(double us) {
  double t0 = now_us();
  while (now_us() - t0 < us) {
  }
}

static pthread_t caller;
static double task_us, call_start, first_other;
static atomic_int other_tasks;

static void task(void *ctx, int64_t i) {
  (void)ctx, (void)i;
  if (!pthread_equal(pthread_self(), caller)) {
    if (first_other < 0)
      first_other = now_us() - call_start;
    atomic_fetch_add(&other_tasks, 1);
  }
  busy_us(task_us);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  double gap = argc > 1 ? atof(argv[1]) : 100;
  int tasks = argc > 2 ? atoi(argv[2]) : 8;
  task_us = argc > 3 ? atof(argv[3]) : 10;
  int threads = argc > 4 ? atoi(argv[4]) : 2;
  caller = pthread_self();
  maxc_rt_set_num_threads(threads);
  enum { kCalls = 301 };
  static double t[kCalls], join[kCalls];
  int joined = 0;
  for (int r = 0; r < kCalls; ++r) {
    busy_us(gap);
    first_other = -1;
    call_start = now_us();
    maxc_rt_parallel_for(0, tasks, task, -1); /* work unknown: always on the pool */
    t[r] = now_us() - call_start;
    join[r] = first_other < 0 ? 1e9 : first_other;
    joined += first_other >= 0;
  }
  maxc_rt_set_num_threads(1);
  qsort(t, kCalls, sizeof t[0], cmp);
  qsort(join, kCalls, sizeof join[0], cmp);
  printf("%d threads, calls %.0f us apart, %d tasks x %.0f us: call median %.1f us (serial %.0f: speedup %.2f); "
         "other threads ran %.0f%% of the tasks, joined %d of %d calls, first join median ",
         threads, gap, tasks, task_us, t[kCalls / 2], tasks * task_us, tasks * task_us / t[kCalls / 2],
         100.0 * other_tasks / ((double)kCalls * tasks), joined, kCalls);
  if (join[kCalls / 2] < 1e9)
    printf("%.1f us\n", join[kCalls / 2]);
  else
    printf("- (most calls ran alone)\n");
  return 0;
}
