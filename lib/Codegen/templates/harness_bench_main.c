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

int main(int argc, char **argv) {
  long runs = 100, warmup = 10, threads = 1, r;
  int i, j, k;
  int64_t d[AT_LEAST_1(NUM_DIMS)];
  int bound[AT_LEAST_1(NUM_DIMS)] = {0};
  int64_t in_shape[AT_LEAST_1(NUM_INPUTS)][MAX_RANK], out_shape[AT_LEAST_1(NUM_OUTPUTS)][MAX_RANK];
  void *in_data[AT_LEAST_1(NUM_INPUTS)] = {0}, *out_data[AT_LEAST_1(NUM_OUTPUTS)] = {0}, *workspace;
  const char *input_files[AT_LEAST_1(NUM_INPUTS)] = {0};
  int64_t workspace_bytes;
  double *times, sum = 0, wall;
  int32_t status;
  for (k = 0; k < AT_LEAST_1(NUM_DIMS); ++k)
    d[k] = 1;
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc && (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--warmup") || !strcmp(argv[i], "--dim") ||
                          !strcmp(argv[i], "--threads") || !strcmp(argv[i], "--input"))) {
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
      if (parse_count("--threads", argv[++i], 1, &threads) != 0)
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
  times = (double *)malloc((size_t)runs * sizeof *times);
  if (!times) {
    fprintf(stderr, "error: out of memory\n");
    return 2;
  }
  wall = now_ms();
  for (r = 0; r < warmup + runs; ++r) {
    double start = now_ms();
/*@RUN@*/    if (r >= warmup)
      times[r - warmup] = now_ms() - start;
    else
      wall = now_ms();
  }
  wall = now_ms() - wall;
  for (r = 0; r < runs; ++r)
    sum += times[r];
  qsort(times, (size_t)runs, sizeof *times, by_value);
/*@HEADLINE@*/  for (k = 0; k < NUM_DIMS; ++k)
    printf("%s %s=%lld", k ? "," : ";", dim_names[k], (long long)d[k]);
  printf("\n");
  printf("latency ms: p50 %.4f  p90 %.4f  p99 %.4f  (min %.4f, mean %.4f, max %.4f)\n", percentile(times, runs, 50),
         percentile(times, runs, 90), percentile(times, runs, 99), times[0], sum / (double)runs, times[runs - 1]);
  printf("throughput: %.1f runs/s\n", wall > 0 ? (double)runs / (wall / 1e3) : 0.0);
  for (i = 0; i < NUM_INPUTS; ++i)
    buffer_free(in_data[i]);
  for (j = 0; j < NUM_OUTPUTS; ++j)
    buffer_free(out_data[j]);
  buffer_free(workspace);
  free(times);
  return 0;
}
#ifdef MAXC_EMBED
")maxc"
#endif
