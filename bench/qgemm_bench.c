/* The integer GEMM (u8 A times an i8 weight B packed at compile time, i32
 * C: maxc's vpdpbusd / vpmaddwd kernel) vs maxc's own f32 GEMM of the same
 * size (sgemm: B an input), alternating runs, medians, at 1 and 2 threads.
 * C is checked against a plain integer product at sampled entries.
 * Built by scripts/bench sgemm. */
#include "qgemm.h"
#include "qgemm_weights.h"
#include "sgemm.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const int n = QGEMM_INPUT_A_DIM0, reps = argc > 1 ? atoi(argv[1]) : 9;
  uint8_t *a = malloc((size_t)n * n);
  int32_t *c = malloc(sizeof(int32_t) * n * n);
  float *af = malloc(sizeof(float) * n * n), *bf = malloc(sizeof(float) * n * n), *cf = malloc(sizeof(float) * n * n);
  for (long i = 0; i < (long)n * n; ++i) {
    a[i] = (uint8_t)((i * 7919) % 256);
    af[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    bf[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
  }
  void *qws = aligned_alloc(64, (size_t)qgemm_workspace_size() + 64);
  void *sws = aligned_alloc(64, (size_t)sgemm_workspace_size() + 64);
  if (qgemm_run(a, c, qws) != 0) {
    fprintf(stderr, "qgemm_run failed\n");
    return 1;
  }
  /* B as the script wrote it: qgemm_weights.h's generator. */
  long bad = 0;
  for (int s = 0; s < 256; ++s) {
    int i = (s * 977) % n, j = (s * 613 + 5) % n;
    int64_t acc = 0;
    for (int k = 0; k < n; ++k)
      acc += (int64_t)a[(long)i * n + k] * qgemm_weight(k, j);
    bad += acc != c[(long)i * n + j];
  }
  for (int threads = 1; threads <= 2; ++threads) {
    double tq[64], ts[64];
    qgemm_set_num_threads(threads);
    sgemm_set_num_threads(threads);
    for (int r = 0; r < reps; ++r) {
      qgemm_run(a, c, qws); /* each timed run follows an untimed one of its own */
      double t0 = now();
      qgemm_run(a, c, qws);
      tq[r] = now() - t0;
      sgemm_run(af, bf, cf, sws);
      t0 = now();
      sgemm_run(af, bf, cf, sws);
      ts[r] = now() - t0;
    }
    qsort(tq, reps, sizeof(double), cmp);
    qsort(ts, reps, sizeof(double), cmp);
    double ops = 2.0 * n * n * n;
    printf("int8 gemm %dx%dx%d (u8 x i8 weight -> i32), %d thread(s): maxc int8 %.2f ms (%.1f GOP/s)  maxc f32 %.2f ms "
           "(%.1f GFLOP/s)  f32/int8 %.2f  wrong entries %ld of 256\n",
           n, n, n, threads, tq[reps / 2] * 1e3, ops / tq[reps / 2] * 1e-9, ts[reps / 2] * 1e3,
           ops / ts[reps / 2] * 1e-9, ts[reps / 2] / tq[reps / 2], bad);
  }
  return bad != 0;
}
