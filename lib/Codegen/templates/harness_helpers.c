/* lib/Codegen/templates/harness_helpers.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c / NAME_bench.c. */
#ifdef MAXC_EMBED
R"maxc(")
#endif
MAXC_UNUSED static float f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  float f;
  if (exponent == 0) {
    f = ldexpf((float)mantissa, -24); /* zero or subnormal */
    return (h & 0x8000u) ? -f : f;
  }
  if (exponent == 31)
    bits = sign | 0x7f800000u | (mantissa << 13);
  else
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Round to nearest even, like maxc's own conversions. */
MAXC_UNUSED static uint16_t float_to_f16(float value) {
  uint32_t x, sign, mantissa, half, rest, mid;
  int exponent, shift;
  memcpy(&x, &value, sizeof x);
  sign = (x >> 16) & 0x8000u;
  mantissa = x & 0x7fffffu;
  if (((x >> 23) & 0xffu) == 0xffu)
    return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  exponent = (int)((x >> 23) & 0xffu) - 127 + 15;
  if (exponent >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (exponent <= 0) {
    if (exponent < -10)
      return (uint16_t)sign;
    mantissa |= 0x800000u;
    shift = 14 - exponent;
    half = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u)))
      ++half;
    return (uint16_t)(sign | half);
  }
  half = ((uint32_t)exponent << 10) | (mantissa >> 13);
  rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; /* a carry into the exponent is still right */
  return (uint16_t)(sign | half);
}

MAXC_UNUSED static float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

MAXC_UNUSED static uint16_t float_to_bf16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* Element i of a buffer of type `type`, as a double. */
MAXC_UNUSED static double value_at(const void *data, int type, int64_t i) {
  switch (type) {
  case T_F16: return f16_to_float(((const uint16_t *)data)[i]);
  case T_BF16: return bf16_to_float(((const uint16_t *)data)[i]);
  case T_F32: return ((const float *)data)[i];
  case T_F64: return ((const double *)data)[i];
  case T_I8: return ((const int8_t *)data)[i];
  case T_I32: return ((const int32_t *)data)[i];
  case T_I64: return (double)((const int64_t *)data)[i];
  case T_I16: return ((const int16_t *)data)[i];
  case T_U16: return ((const uint16_t *)data)[i];
  case T_U32: return ((const uint32_t *)data)[i];
  case T_U64: return (double)((const uint64_t *)data)[i];
  default: return ((const uint8_t *)data)[i];
  }
}

/* 64-byte aligned buffers (the original pointer is kept just before). */
MAXC_UNUSED static void *buffer_new(size_t bytes) {
  unsigned char *raw = (unsigned char *)malloc(bytes + 64 + sizeof(void *)), *p;
  if (!raw) {
    fprintf(stderr, "error: out of memory (%zu bytes)\n", bytes);
    exit(2);
  }
  p = raw + sizeof(void *);
  p += (64 - (uintptr_t)p % 64) % 64;
  memcpy(p - sizeof(void *), &raw, sizeof raw);
  memset(p, 0, bytes);
  return p;
}

MAXC_UNUSED static void buffer_free(void *p) {
  void *raw;
  if (!p)
    return;
  memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
  free(raw);
}

/* --dim NAME=N: sets d[k] for the dim called NAME. Returns 0 or -1. */
MAXC_UNUSED static int parse_dim(const char *text, int64_t *d, int *bound) {
  const char *eq = strchr(text, '=');
  char *end;
  long long value;
  int k;
  if (!eq || eq == text || !eq[1]) {
    fprintf(stderr, "error: --dim expects NAME=N, got '%s'\n", text);
    return -1;
  }
  errno = 0;
  value = strtoll(eq + 1, &end, 10);
  if (*end || errno || value < 0) {
    fprintf(stderr, "error: --dim expects NAME=N with N >= 0, got '%s'\n", text);
    return -1;
  }
  for (k = 0; k < NUM_DIMS; ++k)
    if (strlen(dim_names[k]) == (size_t)(eq - text) && strncmp(dim_names[k], text, (size_t)(eq - text)) == 0) {
      d[k] = (int64_t)value;
      bound[k] = 1;
      return 0;
    }
  fprintf(stderr, "error: --dim %s: the model has no symbolic dim called '%.*s'%s", text, (int)(eq - text), text,
          NUM_DIMS ? "; its dims:" : " (it has none)");
  for (k = 0; k < NUM_DIMS; ++k)
    fprintf(stderr, " %s", dim_names[k]);
  fprintf(stderr, "\n");
  return -1;
}

/* Product of a shape; -1 on a negative dim or overflow. */
MAXC_UNUSED static int64_t numel(const int64_t *shape, int rank) {
  int64_t n = 1;
  int k;
  for (k = 0; k < rank; ++k) {
    if (shape[k] < 0 || (shape[k] > 0 && n > INT64_MAX / shape[k]))
      return -1;
    n *= shape[k];
  }
  return n;
}

MAXC_UNUSED static void print_shape(FILE *out, const int64_t *shape, int rank) {
  int k;
  fputc('[', out);
  for (k = 0; k < rank; ++k)
    fprintf(out, "%s%lld", k ? "," : "", (long long)shape[k]);
  fputc(']', out);
}

#ifdef MAXC_EMBED
")maxc"
#endif
