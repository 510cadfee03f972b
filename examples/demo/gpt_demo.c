/* The main job of scripts/demo: a program that links the GPT example compiled
 * by `maxc compile` like any object file, runs it on a token sequence and
 * prints the most likely next tokens. Usage: gpt_demo TOKENS.bin OUT.bin
 * (raw little-endian int64 tokens in, float32 logits out). */
#include "gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s TOKENS.bin LOGITS.bin\n", argv[0]);
    return 2;
  }
  enum { SEQ = GPT_INPUT_TOKENS_DIM1, VOCAB = GPT_OUTPUT_LOGITS_DIM2 };
  static int64_t tokens[SEQ];
  static float logits[SEQ * VOCAB];
  FILE *in = fopen(argv[1], "rb");
  if (!in || fread(tokens, sizeof tokens, 1, in) != 1) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  fclose(in);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int32_t status = gpt_run(tokens, logits, /*batch=*/1, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (status != GPT_OK) {
    fprintf(stderr, "gpt_run: %s\n", gpt_status_string(status));
    return 1;
  }
  double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;

  /* Top-5 next tokens after the last position. */
  const float *last = logits + (SEQ - 1) * VOCAB;
  int best[5] = {-1, -1, -1, -1, -1};
  for (int r = 0; r < 5; ++r)
    for (int v = 0; v < VOCAB; ++v) {
      int taken = 0;
      for (int q = 0; q < r; ++q)
        taken |= best[q] == v;
      if (!taken && (best[r] < 0 || last[v] > last[best[r]]))
        best[r] = v;
    }
  printf("gpt (4 blocks, one shared subgraph function): %d tokens in %.2f ms\n", SEQ, ms);
  printf("next-token top-5:");
  for (int r = 0; r < 5; ++r)
    printf(" %d (%.3f)", best[r], last[best[r]]);
  printf("\n");

  FILE *out = fopen(argv[2], "wb");
  if (!out || fwrite(logits, sizeof logits, 1, out) != 1) {
    fprintf(stderr, "cannot write %s\n", argv[2]);
    return 1;
  }
  fclose(out);
  return 0;
}
