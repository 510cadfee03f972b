/* Side-by-side SGEMM: maxc's generated kernel vs OpenBLAS's cblas_sgemm,
 * alternating runs, medians, at 1 thread and at 2 threads (maxc on its own
 * pool, sgemm_set_num_threads).
 * Built by scripts/bench. */
#include "sgemm.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Long enough for both libraries' idle workers to sleep. */
static void pause_for_workers(void) {
  struct timespec t = {0, 150 * 1000 * 1000};
  nanosleep(&t, NULL);
}

static void measure(int threads, int reps, const float *a, const float *b, float *c1, float *c2, void *ws, int n) {
  double tm[64], tb[64];
  sgemm_set_num_threads(threads);
  openblas_set_num_threads(threads);
  for (int r = 0; r < reps; ++r) {
    /* At 2 threads each library's timed run follows a pause and an untimed
     * run of its own: the other library's workers have gone to sleep (an
     * OpenBLAS worker spins for about 2^28 cycles after a call, ~70 ms, and
     * on 2 cores it kept maxc's worker off its core: 256^3 at 2 threads
     * timed as 1 thread), and its own are awake, as in a program that calls
     * one of them in a loop. */
    if (threads > 1) {
      pause_for_workers();
      sgemm_run(a, b, c1, ws);
    }
    double t0 = now();
    sgemm_run(a, b, c1, ws);
    tm[r] = now() - t0;
    if (threads > 1) {
      pause_for_workers();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c2, n);
    }
    t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c2, n);
    tb[r] = now() - t0;
  }
  double maxdiff = 0;
  for (long i = 0; i < (long)n * n; ++i) {
    double d = c1[i] - c2[i];
    if (d < 0) d = -d;
    if (d > maxdiff) maxdiff = d;
  }
  qsort(tm, reps, sizeof(double), cmp);
  qsort(tb, reps, sizeof(double), cmp);
  double flops = 2.0 * n * n * n;
  printf("sgemm %dx%dx%d, %d thread(s): maxc %.2f ms (%.1f GFLOP/s)  openblas %.2f ms (%.1f GFLOP/s)  "
         "maxc/openblas %.2f  max|diff| %.1e\n",
         n, n, n, threads, tm[reps / 2] * 1e3, flops / tm[reps / 2] * 1e-9, tb[reps / 2] * 1e3,
         flops / tb[reps / 2] * 1e-9, tb[reps / 2] / tm[reps / 2], maxdiff);
}

int main(int argc, char **argv) {
  const int n = SGEMM_INPUT_A_DIM0, reps = argc > 1 ? atoi(argv[1]) : 9;
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
  float *c1 = malloc(sizeof(float) * n * n), *c2 = malloc(sizeof(float) * n * n);
  for (long i = 0; i < (long)n * n; ++i) {
    a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
  }
  void *ws = aligned_alloc(64, (size_t)sgemm_workspace_size() + 64);
  measure(1, reps, a, b, c1, c2, ws, n);
  measure(2, reps, a, b, c1, c2, ws, n);
  return 0;
}
