/* lib/Codegen/templates/harness_prelude.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c / NAME_bench.c. */
#ifdef MAXC_EMBED
R"maxc(")
#endif
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define MAXC_UNUSED __attribute__((unused))
#else
#define MAXC_UNUSED
#endif

/* Element types (maxc dtypes) and their storage in the entry points. */
enum { T_F16, T_BF16, T_F32, T_F64, T_I8, T_I32, T_I64, T_BOOL };
MAXC_UNUSED static const char *const type_names[] = {"f16", "bf16", "f32", "f64", "i8", "i32", "i64", "bool"};
MAXC_UNUSED static const size_t type_sizes[] = {2, 2, 4, 8, 1, 4, 8, 1};

#ifdef MAXC_EMBED
")maxc"
#endif
