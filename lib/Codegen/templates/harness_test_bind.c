/* lib/Codegen/templates/harness_test_bind.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c / NAME_bench.c. */
#ifdef MAXC_EMBED
R"maxc(")
#endif
/* Binds dim k to axis `axis` of input `input`; they must agree. Returns 0 or -1. */
MAXC_UNUSED static int bind(int64_t *d, int *bound, int k, int64_t value, int input, int axis) {
  if (bound[k] && d[k] != value) {
    fprintf(stderr, "error: input '%s' (%s) has %lld at axis %d, but dim '%s' is %lld\n", input_names[input],
            input_shapes[input], (long long)value, axis, dim_names[k], (long long)d[k]);
    return -1;
  }
  d[k] = value;
  bound[k] = 1;
  return 0;
}

static double default_rtol(int type) {
  switch (type) {
  case T_F16: return 1e-2;
  case T_BF16: return 2e-2;
  case T_F32: return 1e-4;
  case T_F64: return 1e-9;
  default: return 0;
  }
}

static double default_atol(int type) {
  switch (type) {
  case T_F16: return 1e-3;
  case T_BF16: return 1e-2;
  case T_F32: return 1e-5;
  case T_F64: return 1e-12;
  default: return 0;
  }
}

#ifdef MAXC_EMBED
")maxc"
#endif
