/* lib/Codegen/templates/harness_test_helpers.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c and NAME_bench.c (which reads
 * --input files with npy_read), but for
 * TYPE_DESCRS: type_descrs[], which HarnessEmitter.cpp writes from the dtype
 * table (include/maxc/IR/DType.h). */
#ifdef MAXC_EMBED
R"maxc(")
#endif
/* .npy descr of each type; bf16 has none and is read from float32. */
/*@TYPE_DESCRS@*/

typedef struct {
  char descr[16];
  int rank;
  int64_t shape[32];
  int64_t count;
  void *data; /* count elements of the descr's size, 64-byte aligned */
} npy_array;

static int npy_error(const char *path, const char *what) {
  fprintf(stderr, "%s: not a usable .npy file: %s\n", path, what);
  return -1;
}

/* Reads a NumPy .npy file (format 1.0, 2.0 or 3.0, C order). Returns 0 or -1. */
static int npy_read(const char *path, npy_array *a) {
  FILE *f = fopen(path, "rb");
  unsigned char *bytes = NULL;
  size_t size = 0, capacity = 0, n, header_len, start, item = 0;
  char *header, *p;
  int fortran = 0, rc = -1;
  memset(a, 0, sizeof *a);
  if (!f) {
    fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
    return -1;
  }
  for (;;) {
    if (size == capacity) {
      unsigned char *grown;
      capacity = capacity ? capacity * 2 : 65536;
      grown = (unsigned char *)realloc(bytes, capacity);
      if (!grown) {
        free(bytes);
        fclose(f);
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
      }
      bytes = grown;
    }
    n = fread(bytes + size, 1, capacity - size, f);
    size += n;
    if (n == 0)
      break;
  }
  if (ferror(f)) {
    fprintf(stderr, "%s: read error\n", path);
    fclose(f);
    free(bytes);
    return -1;
  }
  fclose(f);
  if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) {
    rc = npy_error(path, "no \\x93NUMPY magic");
    goto done;
  }
  if (bytes[6] == 1) {
    header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    start = 10;
  } else if ((bytes[6] == 2 || bytes[6] == 3) && size >= 12) {
    header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
    start = 12;
  } else {
    rc = npy_error(path, "unsupported format version");
    goto done;
  }
  if (header_len > size - start) {
    rc = npy_error(path, "truncated header");
    goto done;
  }
  header = (char *)malloc(header_len + 1);
  if (!header) {
    rc = npy_error(path, "out of memory");
    goto done;
  }
  memcpy(header, bytes + start, header_len);
  header[header_len] = 0;
  /* 'descr': '<f4' */
  p = strstr(header, "'descr'");
  if (p && (p = strchr(p + 7, ':')) != NULL) {
    char q;
    size_t k = 0;
    ++p;
    while (*p == ' ')
      ++p;
    q = *p;
    if (q == '\'' || q == '"') {
      ++p;
      while (*p && *p != q && k + 1 < sizeof a->descr)
        a->descr[k++] = *p++;
      a->descr[k] = 0;
    }
  }
  if (!a->descr[0]) {
    free(header);
    rc = npy_error(path, "no 'descr' in the header");
    goto done;
  }
  if (a->descr[0] == '=')
    a->descr[0] = '<'; /* native order; this program checked it is little-endian */
  p = strstr(header, "'fortran_order'");
  if (p && (p = strchr(p, ':')) != NULL) {
    ++p;
    while (*p == ' ')
      ++p;
    fortran = strncmp(p, "True", 4) == 0;
  }
  p = strstr(header, "'shape'");
  if (!p || !(p = strchr(p, '('))) {
    free(header);
    rc = npy_error(path, "no 'shape' in the header");
    goto done;
  }
  ++p;
  for (;;) {
    char *end;
    long long v;
    while (*p == ' ' || *p == ',')
      ++p;
    if (*p == ')')
      break;
    errno = 0;
    v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || a->rank == 32) {
      free(header);
      rc = npy_error(path, "malformed 'shape'");
      goto done;
    }
    a->shape[a->rank++] = (int64_t)v;
    p = end;
    while (*p == 'L')
      ++p;
  }
  free(header);
  if (fortran && a->rank > 1) {
    rc = npy_error(path, "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
    goto done;
  }
  if (a->descr[0] == '>' && strcmp(a->descr + 1, "i1") != 0 && strcmp(a->descr + 1, "b1") != 0) {
    rc = npy_error(path, "big-endian data is not supported");
    goto done;
  }
  item = (size_t)atoi(a->descr + 2);
  if (item == 0 || (a->descr[1] != 'f' && a->descr[1] != 'i' && a->descr[1] != 'u' && a->descr[1] != 'b')) {
    rc = npy_error(path, "unsupported dtype (expected a number or bool type)");
    goto done;
  }
  a->count = numel(a->shape, a->rank);
  if (a->count < 0 || (uint64_t)a->count > (uint64_t)(size - start - header_len) / item ||
      (size_t)a->count * item != size - start - header_len) {
    rc = npy_error(path, "the data size does not match the shape");
    goto done;
  }
  a->data = buffer_new((size_t)a->count * item);
  memcpy(a->data, bytes + start + header_len, (size_t)a->count * item);
  rc = 0;
done:
  free(bytes);
  return rc;
}

/* Checks an array's dtype and rank against a model tensor. Returns 0 or -1. */
static int check_array(const char *path, const npy_array *a, const char *what, const char *name, int type, int rank,
                       const char *shape) {
  if (strcmp(a->descr, type_descrs[type]) != 0) {
    fprintf(stderr, "%s: dtype '%s', but %s '%s' is %s and needs '%s'%s\n", path, a->descr, what, name, shape,
            type_descrs[type], type == T_BF16 ? " (bf16 is read from float32)" : "");
    return -1;
  }
  if (a->rank != rank) {
    fprintf(stderr, "%s: rank %d, but %s '%s' is %s\n", path, a->rank, what, name, shape);
    return -1;
  }
  return 0;
}

MAXC_UNUSED static void print_index(FILE *out, int64_t flat, const int64_t *shape, int rank) {
  int64_t index[32];
  int k;
  for (k = rank - 1; k >= 0; --k) {
    index[k] = shape[k] ? flat % shape[k] : 0;
    flat = shape[k] ? flat / shape[k] : 0;
  }
  print_shape(out, index, rank);
}

/* Compares output j with the expected array; prints one line. Returns 1 if it passes. */
MAXC_UNUSED static int compare(int j, const void *actual, const npy_array *expected, const int64_t *shape, int rank,
                   double rtol, double atol) {
  int type = output_types[j], expected_type = type == T_BF16 ? T_F32 : type;
  int64_t i, count = expected->count, bad = 0, first = -1;
  double max_abs = 0, max_rel = 0, first_a = 0, first_e = 0;
  for (i = 0; i < count; ++i) {
    double a = value_at(actual, type, i), e = value_at(expected->data, expected_type, i), err;
    int ok;
    if (isnan(a) || isnan(e)) {
      ok = isnan(a) && isnan(e);
      err = 0;
    } else if (isinf(a) || isinf(e)) {
      ok = a == e;
      err = 0;
    } else {
      err = fabs(a - e);
      ok = err <= atol + rtol * fabs(e);
      if (err > max_abs)
        max_abs = err;
      if (e != 0 && err / fabs(e) > max_rel)
        max_rel = err / fabs(e);
    }
    if (!ok && bad++ == 0) {
      first = i;
      first_a = a;
      first_e = e;
    }
  }
  printf("%s: %s ", output_names[j], type_names[type]);
  print_shape(stdout, shape, rank);
  printf(": max abs error %.3g, max rel error %.3g (rtol %g, atol %g)", max_abs, max_rel, rtol, atol);
  if (!bad) {
    printf(": ok\n");
    return 1;
  }
  printf(": %lld of %lld elements differ; first at ", (long long)bad, (long long)count);
  print_index(stdout, first, shape, rank);
  printf(": got %.9g, expected %.9g\n", first_a, first_e);
  return 0;
}

#ifdef MAXC_EMBED
")maxc"
#endif
