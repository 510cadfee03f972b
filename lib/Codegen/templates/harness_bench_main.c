/* lib/Codegen/templates/harness_bench_main.c: the main() of the generated NAME_bench.c, with
 * @NAME@ markers (in comments) where HarnessEmitter.cpp inserts the model-specific
 * statements (embedded at build time; see harness_prelude.c). */
#ifdef MAXC_EMBED
R"maxc(")
#endif
static int parse_count(const char *flag, const char *text, long minimum, long *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < minimum) {
    fprintf(stderr, "error: %s expects an integer >= %ld, got '%s'\n", flag, minimum, text);
    return -1;
  }
  *out = v;
  return 0;
}

/* --threads T[,T...]: up to MAX_THREAD_COUNTS counts, each >= 1. */
#define MAX_THREAD_COUNTS 8
static int parse_counts(const char *text, long *counts, int *num) {
  char part[32];
  const char *at = text;
  *num = 0;
  for (;;) {
    const char *comma = strchr(at, ',');
    size_t len = comma ? (size_t)(comma - at) : strlen(at);
    if (*num == MAX_THREAD_COUNTS || len == 0 || len >= sizeof part) {
      fprintf(stderr, "error: --threads expects 1 to %d counts separated by commas, got '%s'\n", MAX_THREAD_COUNTS,
              text);
      return -1;
    }
    memcpy(part, at, len);
    part[len] = 0;
    if (parse_count("--threads", part, 1, &counts[*num]) != 0)
      return -1;
    ++*num;
    if (!comma)
      return 0;
    at = comma + 1;
  }
}

int main(int argc, char **argv) {
  long runs = 100, warmup = 10, rounds = 1, r, round;
  long thread_counts[MAX_THREAD_COUNTS] = {1};
  int num_counts = 1, i, j, k, c;
  int64_t d[AT_LEAST_1(NUM_DIMS)];
  int bound[AT_LEAST_1(NUM_DIMS)] = {0};
  int64_t in_shape[AT_LEAST_1(NUM_INPUTS)][MAX_RANK], out_shape[AT_LEAST_1(NUM_OUTPUTS)][MAX_RANK];
  void *in_data[AT_LEAST_1(NUM_INPUTS)] = {0}, *out_data[AT_LEAST_1(NUM_OUTPUTS)] = {0}, *workspace;
  const char *input_files[AT_LEAST_1(NUM_INPUTS)] = {0};
  int64_t workspace_bytes;
  double *times[MAX_THREAD_COUNTS], wall[MAX_THREAD_COUNTS] = {0}, p50[MAX_THREAD_COUNTS];
  int32_t status;
  for (k = 0; k < AT_LEAST_1(NUM_DIMS); ++k)
    d[k] = 1;
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc && (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--warmup") || !strcmp(argv[i], "--dim") ||
                          !strcmp(argv[i], "--threads") || !strcmp(argv[i], "--rounds") ||
                          !strcmp(argv[i], "--input"))) {
      fprintf(stderr, "error: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "-n")) {
      if (parse_count("-n", argv[++i], 1, &runs) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--warmup")) {
      if (parse_count("--warmup", argv[++i], 0, &warmup) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--threads")) {
      if (parse_counts(argv[++i], thread_counts, &num_counts) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--rounds")) {
      if (parse_count("--rounds", argv[++i], 1, &rounds) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--dim")) {
      if (parse_dim(argv[++i], d, bound) != 0)
        return 2;
    } else if (!strcmp(argv[i], "--input")) {
      const char *text = argv[++i], *eq = strchr(text, '=');
      for (k = 0; eq && k < NUM_INPUTS; ++k)
        if (strlen(input_names[k]) == (size_t)(eq - text) && !strncmp(input_names[k], text, (size_t)(eq - text)))
          break;
      if (!eq || eq[1] == 0 || k >= NUM_INPUTS) {
        fprintf(stderr, "error: --input expects NAME=FILE.npy with NAME one of the model's inputs:");
        for (k = 0; k < NUM_INPUTS; ++k)
          fprintf(stderr, " %s", input_names[k]);
        fprintf(stderr, "; got '%s'\n", text);
        return 2;
      }
      input_files[k] = eq + 1;
    } else {
      fprintf(stderr, "error: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }

/*@SHAPES@*/  for (i = 0; i < NUM_INPUTS; ++i) {
    int64_t n = numel(in_shape[i], input_ranks[i]);
    if (n < 0) {
      fprintf(stderr, "error: input '%s' (%s) has an invalid shape for these dims\n", input_names[i],
              input_shapes[i]);
      return 2;
    }
    in_data[i] = buffer_new((size_t)n * type_sizes[input_types[i]]);
    fill(in_data[i], input_types[i], n);
    if (input_files[i] && read_input(input_files[i], i, in_shape[i], in_data[i]) != 0)
      return 2;
  }
  for (j = 0; j < NUM_OUTPUTS; ++j) {
    int64_t n = numel(out_shape[j], output_ranks[j]);
    if (n < 0) {
      fprintf(stderr, "error: output '%s' (%s) has an invalid shape for these dims\n", output_names[j],
              output_shapes[j]);
      return 2;
    }
    out_data[j] = buffer_new((size_t)n * type_sizes[output_types[j]]);
  }
/*@WORKSPACE_SIZE@*/  if (workspace_bytes < 0) {
    fprintf(stderr, "error: invalid dims (the workspace size is %lld)\n", (long long)workspace_bytes);
    return 2;
  }
  workspace = buffer_new((size_t)workspace_bytes);
  for (c = 0; c < num_counts; ++c) {
    times[c] = (double *)malloc((size_t)(runs * rounds) * sizeof *times[c]);
    if (!times[c]) {
      fprintf(stderr, "error: out of memory\n");
      return 2;
    }
  }
  /* Each round runs every thread count once (W warmup runs, then RUNS
   * timed ones), in an order reversed every other round, so that a drift
   * of the machine's speed falls on every count alike. */
  for (round = 0; round < rounds; ++round)
    for (j = 0; j < num_counts; ++j) {
      double block;
      long threads;
      c = round % 2 ? num_counts - 1 - j : j;
      threads = thread_counts[c];
/*@SET_THREADS@*/      block = now_ms();
      for (r = 0; r < warmup + runs; ++r) {
        double start = now_ms();
/*@RUN@*/        if (r >= warmup)
          times[c][round * runs + r - warmup] = now_ms() - start;
        else
          block = now_ms();
      }
      wall[c] += now_ms() - block;
    }
  for (c = 0; c < num_counts; ++c) {
    long n = runs * rounds, threads = thread_counts[c];
    double sum = 0;
    for (r = 0; r < n; ++r)
      sum += times[c][r];
    qsort(times[c], (size_t)n, sizeof *times[c], by_value);
    p50[c] = percentile(times[c], n, 50);
    if (c == 0 || num_counts > 1) {
/*@HEADLINE@*/      if (rounds > 1)
        printf(", %ld rounds", rounds);
      for (k = 0; k < NUM_DIMS; ++k)
        printf("%s %s=%lld", k ? "," : ";", dim_names[k], (long long)d[k]);
      printf("\n");
    }
    printf("latency ms: p50 %.4f  p90 %.4f  p99 %.4f  (min %.4f, mean %.4f, max %.4f)\n", p50[c],
           percentile(times[c], n, 90), percentile(times[c], n, 99), times[c][0], sum / (double)n, times[c][n - 1]);
    printf("throughput: %.1f runs/s\n", wall[c] > 0 ? (double)n / (wall[c] / 1e3) : 0.0);
  }
  for (c = 1; c < num_counts; ++c)
    printf("p50 ratio: %ld thread(s) / %ld thread(s) = %.4f\n", thread_counts[c], thread_counts[0],
           p50[0] > 0 ? p50[c] / p50[0] : 0.0);
  for (i = 0; i < NUM_INPUTS; ++i)
    buffer_free(in_data[i]);
  for (j = 0; j < NUM_OUTPUTS; ++j)
    buffer_free(out_data[j]);
  buffer_free(workspace);
  for (c = 0; c < num_counts; ++c)
    free(times[c]);
  return 0;
}
#ifdef MAXC_EMBED
")maxc"
#endif
