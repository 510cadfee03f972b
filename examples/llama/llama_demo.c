/* Greedy generation with the Llama example compiled by `maxc compile`: the
 * KV cache lives in a llama_state (model state, updated in place), so a
 * prefill is one llama_step over the prompt and each new token one more
 * step of one row. Several prompts are decoded interleaved, each in its own
 * state (one per conversation), to show that states are independent.
 *
 *   llama_demo N PROMPT [PROMPT...]
 *
 * PROMPT: comma-separated token ids (e.g. 1,2,3). Prints one line of N
 * generated tokens per prompt, then the timings on stderr. Exit 1 on a
 * model error, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VOCAB = LLAMA_OUTPUT_LOGITS_DIM2, MAX_PROMPTS = 8 };

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* The argmax of the last row (the first of equal maxima). */
static int64_t argmax(const float *row) {
  int64_t best = 0;
  for (int64_t v = 1; v < VOCAB; ++v)
    if (row[v] > row[best])
      best = v;
  return best;
}

/* Parses "1,2,3" into a malloc'd array; returns the count, 0 when malformed. */
static int64_t parse_tokens(const char *text, int64_t **out) {
  int64_t n = 1;
  for (const char *p = text; *p; ++p)
    n += *p == ',';
  int64_t *tokens = malloc(n * sizeof *tokens);
  const char *p = text;
  for (int64_t i = 0; i < n; ++i) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || v >= VOCAB || (*end != ',' && *end != '\0')) {
      free(tokens);
      return 0;
    }
    tokens[i] = v;
    p = end + 1;
  }
  *out = tokens;
  return n;
}

int main(int argc, char **argv) {
  int64_t n_new = argc > 2 ? atoll(argv[1]) : 0;
  int n_prompts = argc - 2;
  if (argc < 3 || n_new < 1 || n_prompts > MAX_PROMPTS) {
    fprintf(stderr, "usage: %s N PROMPT [PROMPT...]   (N >= 1 tokens; PROMPT: ids like 1,2,3; at most %d)\n",
            argv[0], MAX_PROMPTS);
    return 2;
  }
  int64_t *prompt[MAX_PROMPTS], length[MAX_PROMPTS], *out[MAX_PROMPTS];
  llama_state *state[MAX_PROMPTS];
  float *logits = NULL;
  int64_t longest = 1;
  for (int c = 0; c < n_prompts; ++c) {
    length[c] = parse_tokens(argv[2 + c], &prompt[c]);
    if (!length[c]) {
      fprintf(stderr, "%s: bad prompt '%s' (expected token ids below %d, comma-separated)\n", argv[0], argv[2 + c],
              VOCAB);
      return 2;
    }
    longest = length[c] > longest ? length[c] : longest;
    /* Room for the prompt and the tokens fed back (the last is not). */
    state[c] = llama_state_create(length[c] + n_new - 1);
    out[c] = malloc(n_new * sizeof *out[c]);
    if (!state[c] || !out[c]) {
      fprintf(stderr, "%s: out of memory\n", argv[0]);
      return 1;
    }
  }
  logits = malloc(longest * VOCAB * sizeof *logits);
  if (!logits) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    return 1;
  }

  double prefill_ms = 0, decode_ms = 0;
  for (int64_t t = 0; t < n_new; ++t) {
    for (int c = 0; c < n_prompts; ++c) { /* one step of every conversation, in turn */
      /* Step 0 feeds the whole prompt, then the last token generated. */
      const int64_t *tokens = t == 0 ? prompt[c] : &out[c][t - 1];
      int64_t seq = t == 0 ? length[c] : 1;
      double t0 = now_ms();
      int32_t status = llama_step(state[c], tokens, logits, seq);
      double ms = now_ms() - t0;
      if (status != LLAMA_OK) {
        fprintf(stderr, "llama_step: %s\n", llama_status_string(status));
        return 1;
      }
      *(t == 0 ? &prefill_ms : &decode_ms) += ms;
      out[c][t] = argmax(logits + (seq - 1) * VOCAB);
    }
  }
  for (int c = 0; c < n_prompts; ++c) {
    for (int64_t t = 0; t < n_new; ++t)
      printf(t ? " %lld" : "%lld", (long long)out[c][t]);
    printf("\n");
    if (llama_state_length(state[c]) != length[c] + n_new - 1) {
      fprintf(stderr, "state %d holds %lld rows, expected %lld\n", c, (long long)llama_state_length(state[c]),
              (long long)(length[c] + n_new - 1));
      return 1;
    }
    llama_state_destroy(state[c]);
    free(prompt[c]);
    free(out[c]);
  }
  free(logits);
  int64_t decoded = n_prompts * (n_new - 1);
  fprintf(stderr, "llama: %d prompt(s); prefill %.2f ms; %lld decode steps in %.2f ms (%.1f tokens/s)\n", n_prompts,
          prefill_ms, (long long)decoded, decode_ms, decode_ms > 0 ? decoded * 1e3 / decode_ms : 0.0);
  return 0;
}
