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

/* Input I's values from a .npy file (--input): its dtype and shape must be
 * the input's for these dims (bf16 is read from float32). Returns 0 or -1. */
static int read_input(const char *path, int i, const int64_t *shape, void *data) {
  npy_array a;
  int64_t k;
  if (npy_read(path, &a) != 0 ||
      check_array(path, &a, "input", input_names[i], input_types[i], input_ranks[i], input_shapes[i]) != 0)
    return -1;
  for (k = 0; k < input_ranks[i]; ++k)
    if (a.shape[k] != shape[k]) {
      fprintf(stderr, "%s: shape ", path);
      print_shape(stderr, a.shape, a.rank);
      fprintf(stderr, ", but input '%s' is %s, here ", input_names[i], input_shapes[i]);
      print_shape(stderr, shape, input_ranks[i]);
      fprintf(stderr, "\n");
      buffer_free(a.data);
      return -1;
    }
  if (input_types[i] == T_BF16) {
    for (k = 0; k < a.count; ++k)
      ((uint16_t *)data)[k] = float_to_bf16(((const float *)a.data)[k]);
  } else {
    memcpy(data, a.data, (size_t)a.count * type_sizes[input_types[i]]);
  }
  buffer_free(a.data);
  return 0;
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
