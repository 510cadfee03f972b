/* lib/Codegen/templates/harness_prelude.c: C that maxc pastes into the generated harnesses
 * (HarnessEmitter.cpp embeds it at build time; the harness test compiles it
 * as C with -Wall -Wextra -pedantic -Werror). Between the two MAXC_EMBED
 * markers every byte is copied into NAME_test.c / NAME_bench.c, but for
 * DTYPE_TABLES: the enum { T_F16, ... }, type_names[] and type_sizes[] that
 * HarnessEmitter.cpp writes from the dtype table (include/maxc/IR/DType.h). */
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
/*@DTYPE_TABLES@*/

#ifdef MAXC_EMBED
")maxc"
#endif
