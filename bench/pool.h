/* A small persistent thread pool for the benches' parallel_for (what a
 * program installs with NAME_set_parallel_for). Header-only, one global pool.
 *
 *   bench_pool_start(n);                      // n - 1 workers + the caller
 *   NAME_set_parallel_for(bench_parallel_for); // if n > 1
 *
 * bench_parallel_for(ctx, count, task) hands out task indices through an
 * atomic counter to the workers and the calling thread, and returns when all
 * are done. Waiting threads spin briefly (a GEMM's next call is usually
 * microseconds away), then sleep on a condition variable, so an idle pool
 * costs no CPU while the other side of a side-by-side bench runs. */
#ifndef MAXC_BENCH_POOL_H
#define MAXC_BENCH_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define BENCH_POOL_MAX 64
#define BENCH_POOL_SPIN 20000

typedef void (*bench_task_fn)(void *ctx, int64_t i);

static struct {
  int workers;
  pthread_t tid[BENCH_POOL_MAX];
  pthread_mutex_t mu;
  pthread_cond_t wake, idle;
  atomic_uint_fast64_t generation; /* bumped for each job */
  atomic_int_fast64_t next;        /* next task index */
  atomic_int busy;                 /* workers still in the current job */
  void *ctx;
  int64_t count;
  bench_task_fn task;
} bench_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void bench_pool_drain(void) {
  for (int64_t i; (i = atomic_fetch_add(&bench_pool.next, 1)) < bench_pool.count;)
    bench_pool.task(bench_pool.ctx, i);
}

static void *bench_pool_worker(void *arg) {
  (void)arg;
  uint_fast64_t seen = 0;
  for (;;) {
    uint_fast64_t g = atomic_load(&bench_pool.generation);
    for (int spin = 0; g == seen && spin < BENCH_POOL_SPIN; ++spin)
      g = atomic_load(&bench_pool.generation);
    if (g == seen) {
      pthread_mutex_lock(&bench_pool.mu);
      while ((g = atomic_load(&bench_pool.generation)) == seen)
        pthread_cond_wait(&bench_pool.wake, &bench_pool.mu);
      pthread_mutex_unlock(&bench_pool.mu);
    }
    seen = g;
    bench_pool_drain();
    if (atomic_fetch_sub(&bench_pool.busy, 1) == 1) {
      pthread_mutex_lock(&bench_pool.mu);
      pthread_cond_signal(&bench_pool.idle);
      pthread_mutex_unlock(&bench_pool.mu);
    }
  }
  return 0;
}

/* Starts threads - 1 workers (once; later calls do nothing). */
static void bench_pool_start(int threads) {
  if (bench_pool.workers > 0 || threads < 2)
    return;
  if (threads > BENCH_POOL_MAX)
    threads = BENCH_POOL_MAX;
  for (int i = 0; i < threads - 1; ++i)
    if (pthread_create(&bench_pool.tid[i], 0, bench_pool_worker, 0) == 0)
      ++bench_pool.workers;
}

static void bench_parallel_for(void *ctx, int64_t count, bench_task_fn task) {
  if (bench_pool.workers == 0 || count < 2) {
    for (int64_t i = 0; i < count; ++i)
      task(ctx, i);
    return;
  }
  bench_pool.ctx = ctx;
  bench_pool.count = count;
  bench_pool.task = task;
  atomic_store(&bench_pool.next, 0);
  atomic_store(&bench_pool.busy, bench_pool.workers);
  pthread_mutex_lock(&bench_pool.mu);
  atomic_fetch_add(&bench_pool.generation, 1);
  pthread_cond_broadcast(&bench_pool.wake);
  pthread_mutex_unlock(&bench_pool.mu);
  bench_pool_drain();
  for (int spin = 0; atomic_load(&bench_pool.busy) > 0 && spin < BENCH_POOL_SPIN; ++spin) {
  }
  if (atomic_load(&bench_pool.busy) > 0) {
    pthread_mutex_lock(&bench_pool.mu);
    while (atomic_load(&bench_pool.busy) > 0)
      pthread_cond_wait(&bench_pool.idle, &bench_pool.mu);
    pthread_mutex_unlock(&bench_pool.mu);
  }
}

#endif
