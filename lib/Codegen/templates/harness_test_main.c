/* lib/Codegen/templates/harness_test_main.c: the main() of the generated NAME_test.c, with
 * @NAME@ markers (in comments) where HarnessEmitter.cpp inserts the model-specific
 * statements (embedded at build time; see harness_prelude.c). */
#ifdef MAXC_EMBED
R"maxc(")
#endif
int main(int argc, char **argv) {
  const char *paths[AT_LEAST_1(NUM_INPUTS + NUM_OUTPUTS)];
  int npaths = 0, i, j, k, passed = 1;
  double rtol = -1, atol = -1;
  int64_t d[AT_LEAST_1(NUM_DIMS)] = {0};
  int bound[AT_LEAST_1(NUM_DIMS)] = {0};
  int64_t in_shape[AT_LEAST_1(NUM_INPUTS)][MAX_RANK], out_shape[AT_LEAST_1(NUM_OUTPUTS)][MAX_RANK];
  npy_array in[AT_LEAST_1(NUM_INPUTS)], expected;
  void *in_data[AT_LEAST_1(NUM_INPUTS)] = {0}, *out_data[AT_LEAST_1(NUM_OUTPUTS)] = {0};
  int32_t status;
  uint16_t one = 1;
  if (*(unsigned char *)&one != 1) {
    fprintf(stderr, "error: this harness reads little-endian .npy data on a little-endian machine only\n");
    return 2;
  }
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) {
      char *end;
      double v;
      if (i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[i]);
        return 2;
      }
      v = strtod(argv[i + 1], &end);
      if (end == argv[i + 1] || *end || !(v >= 0)) {
        fprintf(stderr, "error: %s expects a number >= 0, got '%s'\n", argv[i], argv[i + 1]);
        return 2;
      }
      if (argv[i][2] == 'r')
        rtol = v;
      else
        atol = v;
      ++i;
      continue;
    }
    if (!strcmp(argv[i], "--dim")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "error: --dim needs NAME=N\n");
        return 2;
      }
      if (parse_dim(argv[++i], d, bound) != 0)
        return 2;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
    if (npaths == NUM_INPUTS + NUM_OUTPUTS) {
      fprintf(stderr, "error: too many files: expected %d inputs and %d expected outputs\n", NUM_INPUTS,
              NUM_OUTPUTS);
      usage(stderr);
      return 2;
    }
    paths[npaths++] = argv[i];
  }
  if (npaths != NUM_INPUTS + NUM_OUTPUTS) {
    fprintf(stderr, "error: expected %d input and %d expected-output .npy files, got %d\n", NUM_INPUTS, NUM_OUTPUTS,
            npaths);
    usage(stderr);
    return 2;
  }
  for (i = 0; i < NUM_INPUTS; ++i)
    if (npy_read(paths[i], &in[i]) != 0 ||
        check_array(paths[i], &in[i], "input", input_names[i], input_types[i], input_ranks[i], input_shapes[i]) != 0)
      return 2;

  /* Symbolic dims from the inputs' shapes. */
/*@BIND_DIMS@*/  for (k = 0; k < NUM_DIMS; ++k)
    if (!bound[k]) {
      fprintf(stderr, "error: no input determines symbolic dim '%s': pass --dim %s=N\n", dim_names[k], dim_names[k]);
      return 2;
    }

  /* Every input dim must be what the model says for these dims. */
/*@INPUT_SHAPES@*/  for (i = 0; i < NUM_INPUTS; ++i)
    for (k = 0; k < input_ranks[i]; ++k)
      if (in[i].shape[k] != in_shape[i][k]) {
        fprintf(stderr, "%s: shape ", paths[i]);
        print_shape(stderr, in[i].shape, in[i].rank);
        fprintf(stderr, ", but input '%s' is %s, here ", input_names[i], input_shapes[i]);
        print_shape(stderr, in_shape[i], input_ranks[i]);
        fprintf(stderr, "\n");
        return 2;
      }
  for (i = 0; i < NUM_INPUTS; ++i) {
    if (input_types[i] == T_BF16) { /* read as float32 */
      uint16_t *bits = (uint16_t *)buffer_new((size_t)in[i].count * 2);
      int64_t e;
      for (e = 0; e < in[i].count; ++e)
        bits[e] = float_to_bf16(((const float *)in[i].data)[e]);
      in_data[i] = bits;
    } else {
      in_data[i] = in[i].data;
    }
  }

  /* Outputs. */
/*@OUTPUT_SHAPES@*/  for (j = 0; j < NUM_OUTPUTS; ++j) {
    int64_t n = numel(out_shape[j], output_ranks[j]);
    if (n < 0) {
      fprintf(stderr, "error: output '%s' (%s) has an invalid shape for these dims\n", output_names[j],
              output_shapes[j]);
      return 2;
    }
    out_data[j] = buffer_new((size_t)n * type_sizes[output_types[j]]);
  }

/*@RUN@*/  for (j = 0; j < NUM_OUTPUTS; ++j) {
    const char *path = paths[NUM_INPUTS + j];
    int type = output_types[j];
    if (npy_read(path, &expected) != 0 ||
        check_array(path, &expected, "output", output_names[j], type, output_ranks[j], output_shapes[j]) != 0)
      return 2;
    for (k = 0; k < output_ranks[j]; ++k)
      if (expected.shape[k] != out_shape[j][k])
        break;
    if (k < output_ranks[j]) {
      printf("%s: the model's output is ", output_names[j]);
      print_shape(stdout, out_shape[j], output_ranks[j]);
      printf(", %s holds ", path);
      print_shape(stdout, expected.shape, expected.rank);
      printf("\n");
      passed = 0;
    } else if (!compare(j, out_data[j], &expected, out_shape[j], output_ranks[j],
                        rtol >= 0 ? rtol : default_rtol(type), atol >= 0 ? atol : default_atol(type))) {
      passed = 0;
    }
    buffer_free(expected.data);
  }
  for (i = 0; i < NUM_INPUTS; ++i) {
    if (in_data[i] != in[i].data)
      buffer_free(in_data[i]);
    buffer_free(in[i].data);
  }
  for (j = 0; j < NUM_OUTPUTS; ++j)
    buffer_free(out_data[j]);
/*@SUMMARY@*/
#ifdef MAXC_EMBED
")maxc"
#endif
