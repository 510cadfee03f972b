/* A timing server for one maxc-compiled model with one input, one output and
 * one symbolic dim (the batch), driven by bench/model_bench.py so that its
 * timing blocks alternate with ONNX Runtime's (bench/ort_bench.js) in one run.
 *
 * Built by scripts/bench, once per model:
 *   cc -O2 -DMODEL=mlp -include build/bench/mlp.h bench/model_bench.c build/bench/mlp.o -lm -lpthread
 *
 * Usage: mlp_bench [THREADS]: the model runs on THREADS threads of its own
 * pool (NAME_set_num_threads); default 1.
 *
 * Protocol: one request per stdin line,
 *   INPUT.bin BATCH OUT_ELEMS ITERS WARMUP OUT.bin|-
 * INPUT.bin holds the input tensor's raw bytes for that batch; the model runs
 * WARMUP untimed then ITERS timed times on it (preallocated
 * workspace), writes the output (OUT_ELEMS floats) to OUT.bin unless "-", and
 * answers one line: the ITERS run times in ms, space separated, or "error ...". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN_PACKED CAT(MODEL, _run_packed)
#define WORKSPACE_SIZE CAT(MODEL, _workspace_size)
#define STATUS_STRING CAT(MODEL, _status_string)
#define SET_NUM_THREADS CAT(MODEL, _set_num_threads)
/* -DWORKSPACE_ARGS= for a model whose dims are all pinned (maxc compile --dim),
 * whose NAME_workspace_size takes no arguments. */
#ifndef WORKSPACE_ARGS
#define WORKSPACE_ARGS batch
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *read_file(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = aligned_alloc(64, ((size_t)*size + 63) / 64 * 64 + 64);
  if (p && fread(p, 1, (size_t)*size, f) != (size_t)*size) {
    free(p);
    p = NULL;
  }
  fclose(f);
  return p;
}

int main(int argc, char **argv) {
  char line[4096], in_path[2048], out_path[2048];
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  SET_NUM_THREADS(threads);
  long long batch, out_elems;
  int iters, warmup;
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    if (sscanf(line, "%2047s %lld %lld %d %d %2047s", in_path, &batch, &out_elems, &iters, &warmup, out_path) != 6 ||
        iters < 1) {
      printf("error bad request\n");
      continue;
    }
    long in_size;
    void *in = read_file(in_path, &in_size);
    float *out = aligned_alloc(64, ((size_t)out_elems * sizeof(float) + 63) / 64 * 64);
    int64_t dims[1] = {batch};
    void *ws = aligned_alloc(64, ((size_t)WORKSPACE_SIZE(WORKSPACE_ARGS) + 63) / 64 * 64 + 64);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!in || !out || !ws || !t) {
      printf("error cannot read %s or allocate\n", in_path);
      free(in), free(out), free(ws), free(t);
      continue;
    }
    void *buffers[2] = {in, out};
    int32_t status = 0;
    for (int i = 0; i < warmup && !status; ++i) status = RUN_PACKED(buffers, dims, ws);
    for (int i = 0; i < iters && !status; ++i) {
      double t0 = now();
      status = RUN_PACKED(buffers, dims, ws);
      t[i] = (now() - t0) * 1e3;
    }
    if (status) {
      printf("error %s\n", STATUS_STRING(status));
    } else {
      if (strcmp(out_path, "-") != 0) {
        FILE *f = fopen(out_path, "wb");
        if (f) {
          fwrite(out, sizeof(float), (size_t)out_elems, f);
          fclose(f);
        }
      }
      for (int i = 0; i < iters; ++i) printf(i ? " %.6f" : "%.6f", t[i]);
      printf("\n");
    }
    free(in), free(out), free(ws), free(t);
  }
  return 0;
}
