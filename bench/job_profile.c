/* Per-job wall times of one maxc-compiled model: link this file next to the
 * model's bench harness (maxc compile ... --emit obj,header,bench-harness),
 * and it installs its own parallel-for (NAME_set_parallel_for, before main)
 * that runs each parallel kernel ("job") on PROF_THREADS threads (1 or 2,
 * default 1: the caller and one spinning worker, claiming as the pool does)
 * and times it. At exit it prints, per job of a run (in call order), the task
 * function's address, its task count, the mean wall time and the mean time
 * since the previous job ended (serial code between jobs: work the model runs
 * on the calling thread alone). Means over all runs, warmup included.
 * bench/job_profile.sh builds it and names the task functions (nm).
 *
 *   cc -O2 -no-pie -DMODEL=resnet18 -o prof \
 *      resnet18_bench.c bench/job_profile.c resnet18.o -lm -lpthread
 *   PROF_THREADS=2 ./prof -n 30 --warmup 3
 *
 * A run is taken to start at each call of the first job's task function (the
 * first job of a model is called once per run). Indicative: a spinning
 * worker, not the model's pool; not a test. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SET_PARALLEL_FOR CAT(MODEL, _set_parallel_for)
typedef void (*task_fn)(void *ctx, int64_t i);
void SET_PARALLEL_FOR(void (*)(void *, int64_t, task_fn));

enum { MAX_JOBS = 4096 };
static struct {
  task_fn fn;
  int64_t count;
  double wall, gap;
} jobs[MAX_JOBS];
static int njobs, job, threads = 1;
static long runs;
static task_fn first;
static double last;
static _Atomic long generation, finished;
static void *g_ctx;
static int64_t g_count;
static task_fn g_task;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Claims as the model's pool does (RuntimePool.c): thread k owns the k-th
 * half of the indices, runs it one index per claim from the front, then
 * steals a quarter of what is left (at least one) from the back of the
 * other half. */
static _Atomic uint64_t ranges[2][8]; /* [k][0]: lo | hi << 32, a line each */

static int claim(int k, int own, long *i0, long *i1) {
  uint64_t r = atomic_load(&ranges[k][0]);
  for (;;) {
    long lo = (long)(r & 0xffffffffu), hi = (long)(r >> 32), take = own ? 1 : (hi - lo + 3) / 4;
    if (lo >= hi)
      return 0;
    *i0 = own ? lo : hi - take;
    *i1 = *i0 + take;
    if (atomic_compare_exchange_weak(&ranges[k][0], &r,
                                     own ? (uint64_t)(lo + 1) | (uint64_t)hi << 32 : (uint64_t)lo | (uint64_t)(hi - take) << 32))
      return 1;
  }
}

static void take(int self) {
  long done = 0, i0, i1, i;
  for (int d = 0; d < threads; ++d)
    while (claim((self + d) % threads, d == 0, &i0, &i1)) {
      for (i = i0; i < i1; ++i)
        g_task(g_ctx, i);
      done += i1 - i0;
    }
  atomic_fetch_add(&finished, done);
}

static void *worker(void *arg) {
  long seen = 0, g;
  (void)arg;
  for (;;) {
    while ((g = atomic_load(&generation)) == seen)
      ;
    seen = g;
    take(1);
  }
  return NULL;
}

static void parallel_for(void *ctx, int64_t count, task_fn task) {
  double t0 = now_ns(), t1;
  if (!first)
    first = task;
  if (task == first) {
    job = 0;
    ++runs;
  } else if (job < MAX_JOBS) {
    jobs[job].gap += t0 - last;
  }
  g_ctx = ctx;
  g_count = count;
  g_task = task;
  atomic_store(&finished, 0);
  for (int k = 0; k < threads; ++k)
    atomic_store(&ranges[k][0], (uint64_t)(count * k / threads) | (uint64_t)(count * (k + 1) / threads) << 32);
  if (threads > 1)
    atomic_fetch_add(&generation, 1);
  take(0);
  while (atomic_load(&finished) < count)
    ;
  t1 = now_ns();
  if (job < MAX_JOBS) {
    jobs[job].fn = task;
    jobs[job].count = count;
    jobs[job].wall += t1 - t0;
    if (job + 1 > njobs)
      njobs = job + 1;
  }
  ++job;
  last = t1;
}

static void report(void) {
  double wall = 0, gap = 0;
  int k;
  if (!runs)
    return;
  printf("job_profile: %ld runs, %d thread(s), %d jobs per run\n", runs, threads, njobs);
  for (k = 0; k < njobs; ++k) {
    printf("job %4d %p tasks %6lld wall_us %9.1f gap_us %7.1f\n", k, (void *)(uintptr_t)jobs[k].fn,
           (long long)jobs[k].count, jobs[k].wall / runs / 1e3, jobs[k].gap / runs / 1e3);
    wall += jobs[k].wall;
    gap += jobs[k].gap;
  }
  printf("sum: jobs %.3f ms, gaps %.3f ms per run\n", wall / runs / 1e6, gap / runs / 1e6);
}

__attribute__((constructor)) static void install(void) {
  const char *t = getenv("PROF_THREADS");
  pthread_t th;
  threads = t && atoi(t) > 1 ? 2 : 1;
  if (threads > 1 && pthread_create(&th, NULL, worker, NULL) != 0)
    threads = 1;
  SET_PARALLEL_FOR(parallel_for);
  atexit(report);
}
