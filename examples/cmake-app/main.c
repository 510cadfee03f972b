/* cmake_app: two models compiled by maxc_add_model() linked into one program.
 *
 * Runs the MLP and the CNN on deterministic inputs and checks what a user of
 * the generated code can rely on: status codes, finite outputs, identical
 * results for identical calls (with and without a caller workspace), a batch
 * row matching the same row run alone, and errors for bad arguments. Prints
 * the logits; exits non-zero on any failure. */
#include "cnn.h"
#include "mlp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "cmake_app: FAIL %s:%d: ", __FILE__, __LINE__);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* Deterministic inputs in [-0.5, 0.5). */
static void fill(float *data, size_t count, unsigned seed) {
  uint32_t state = 2463534242u ^ seed;
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    data[i] = (float)(state % 10000u) / 10000.0f - 0.5f;
  }
}

static int all_finite(const float *data, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!isfinite(data[i]))
      return 0;
  return 1;
}

static int close_enough(const float *a, const float *b, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (fabsf(a[i] - b[i]) > 1e-4f * (1.0f + fabsf(b[i])))
      return 0;
  return 1;
}

static void print_logits(const char *model, const float *logits, int64_t batch, int64_t classes) {
  for (int64_t b = 0; b < batch; ++b) {
    printf("%s[%lld]:", model, (long long)b);
    for (int64_t c = 0; c < classes; ++c)
      printf(" %.6f", logits[b * classes + c]);
    printf("\n");
  }
}

static void check_mlp(void) {
  enum { BATCH = 2, IN = MLP_INPUT_X_DIM1, OUT = MLP_OUTPUT_LOGITS_DIM1 };
  static float x[BATCH * IN], logits[BATCH * OUT], again[BATCH * OUT], row[OUT];
  fill(x, BATCH * IN, 1);

  int32_t status = mlp_run(x, logits, BATCH, NULL);
  CHECK(status == MLP_OK, "mlp_run: %s", mlp_status_string(status));
  CHECK(all_finite(logits, BATCH * OUT), "mlp: non-finite logits");

  /* The same call with a caller-provided workspace gives the same bits. */
  int64_t bytes = mlp_workspace_size(BATCH);
  CHECK(bytes > 0, "mlp_workspace_size(%d) = %lld", BATCH, (long long)bytes);
  void *workspace = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  status = mlp_run(x, again, BATCH, workspace);
  free(workspace);
  CHECK(status == MLP_OK, "mlp_run (workspace): %s", mlp_status_string(status));
  CHECK(memcmp(logits, again, sizeof logits) == 0, "mlp: two identical runs differ");

  /* Row 1 of the batch equals row 1 run alone. */
  status = mlp_run(x + IN, row, 1, NULL);
  CHECK(status == MLP_OK, "mlp_run (batch 1): %s", mlp_status_string(status));
  CHECK(close_enough(row, logits + OUT, OUT), "mlp: batch row differs from the row run alone");

  CHECK(mlp_run(NULL, logits, BATCH, NULL) != MLP_OK, "mlp_run(NULL input) succeeded");
  print_logits("mlp", logits, BATCH, OUT);
}

static void check_cnn(void) {
  enum {
    BATCH = 2,
    IN = CNN_INPUT_IMAGE_DIM1 * CNN_INPUT_IMAGE_DIM2 * CNN_INPUT_IMAGE_DIM3,
    OUT = CNN_OUTPUT_LOGITS_DIM1
  };
  static float image[BATCH * IN], logits[BATCH * OUT], row[OUT];
  fill(image, BATCH * IN, 2);

  int32_t status = cnn_run(image, logits, BATCH, NULL);
  CHECK(status == CNN_OK, "cnn_run: %s", cnn_status_string(status));
  CHECK(all_finite(logits, BATCH * OUT), "cnn: non-finite logits");

  status = cnn_run(image, row, 1, NULL);
  CHECK(status == CNN_OK, "cnn_run (batch 1): %s", cnn_status_string(status));
  CHECK(close_enough(row, logits, OUT), "cnn: batch row differs from the row run alone");

  CHECK(cnn_run(image, NULL, BATCH, NULL) != CNN_OK, "cnn_run(NULL output) succeeded");
  print_logits("cnn", logits, BATCH, OUT);
}

int main(void) {
  /* Two models in one program: distinct entry points and ABIs. */
  typedef void (*fn)(void);
  CHECK((fn)mlp_run != (fn)cnn_run, "mlp_run and cnn_run are the same function");
  CHECK((fn)mlp_status_string != (fn)cnn_status_string, "status_string entry points are shared");
  CHECK(MLP_ABI_HASH != CNN_ABI_HASH, "the two models have the same ABI hash");

  check_mlp();
  check_cnn();
  if (failures) {
    fprintf(stderr, "cmake_app: %d check(s) failed\n", failures);
    return 1;
  }
  printf("cmake_app: OK\n");
  return 0;
}
