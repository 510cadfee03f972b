/* Runs one maxc-compiled model (one f32 input, one f32 output, up to 4
 * symbolic dims) once per request, for bench/ocr_sizes.py: one object, run
 * at several input sizes.
 *
 *   cc -O2 -DMODEL=det -include det.h bench/sizes_run.c det.o -lm -lpthread
 *   ./a.out IN.bin OUT.bin OUT_FLOATS RUNS DIM...
 *
 * DIM...: the values of the model's dims, in NAME_run's order (none for a
 * model compiled with every dim pinned). The workspace is allocated once
 * (NAME_workspace_size, called through a 4-argument pointer: extra integer
 * arguments are ignored under the x86-64 and AArch64 C calling conventions);
 * the model then runs RUNS times and the fastest time is printed ("ms T");
 * the last run's output is written to OUT.bin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN_PACKED CAT(MODEL, _run_packed)
#define WORKSPACE_SIZE CAT(MODEL, _workspace_size)

int main(int argc, char **argv) {
  if (argc < 5 || argc > 9) {
    fprintf(stderr, "usage: %s IN.bin OUT.bin OUT_FLOATS RUNS DIM...\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f)
    return 3;
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *in = malloc(bytes);
  if (fread(in, 1, bytes, f) != (size_t)bytes)
    return 3;
  fclose(f);
  long nout = atol(argv[3]), runs = atol(argv[4]);
  float *out = calloc(nout, 4);
  int64_t dims[4] = {0, 0, 0, 0};
  for (int i = 5; i < argc; ++i)
    dims[i - 5] = atoll(argv[i]);
  int64_t (*ws_size)(int64_t, int64_t, int64_t, int64_t) = (int64_t(*)(int64_t, int64_t, int64_t, int64_t))WORKSPACE_SIZE;
  int64_t ws_bytes = ws_size(dims[0], dims[1], dims[2], dims[3]);
  if (ws_bytes < 0) {
    fprintf(stderr, "error: invalid dims\n");
    return 4;
  }
  void *ws = NULL;
  if (posix_memalign(&ws, 64, ws_bytes > 0 ? ws_bytes : 64))
    return 5;
  void *buffers[2] = {in, out};
  double best = 1e30;
  for (long r = 0; r < runs; ++r) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int status = RUN_PACKED(buffers, dims, ws);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (status) {
      fprintf(stderr, "error: run status %d\n", status);
      return 6;
    }
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    best = ms < best ? ms : best;
  }
  printf("ms %.3f\n", best);
  f = fopen(argv[2], "wb");
  fwrite(out, 4, nout, f);
  fclose(f);
  return 0;
}
