/* lib/Codegen/templates/harness_bench_helpers.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c / NAME_bench.c. */
#ifdef MAXC_EMBED
R"maxc(")
#endif
/* Deterministic pseudo-random inputs (xorshift64*): floats uniform in
 * [-1, 1), integers 0 (always a valid index), bools 0 or 1. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double next_uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static void fill(void *data, int type, int64_t n) {
  int64_t i;
  for (i = 0; i < n; ++i) {
    double u = 2 * next_uniform() - 1;
    switch (type) {
    case T_F16: ((uint16_t *)data)[i] = float_to_f16((float)u); break;
    case T_BF16: ((uint16_t *)data)[i] = float_to_bf16((float)u); break;
    case T_F32: ((float *)data)[i] = (float)u; break;
    case T_F64: ((double *)data)[i] = u; break;
    case T_BOOL: ((uint8_t *)data)[i] = u < 0; break;
    default: break; /* integers stay 0 */
    }
  }
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *sorted, long n, double p) {
  long rank = (long)ceil(p / 100.0 * (double)n);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return sorted[rank - 1];
}

#ifdef MAXC_EMBED
")maxc"
#endif
