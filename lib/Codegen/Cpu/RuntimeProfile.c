/* lib/Codegen/Cpu/RuntimeProfile.c: the per-kernel counters of a profile
 * build (maxc compile --profile, maxc profile; docs/profiling.md).
 *
 * Included at the end of RuntimePool.c when that is compiled with
 * -DMAXC_RT_PROFILE (lib/CMakeLists.txt builds both bitcodes; Runtime.cpp
 * links this one only into profile builds, so that other artifacts stay the
 * same bytes). The same rules as RuntimePool.c: no system header, LP64.
 *
 * Generated code brackets every kernel of every graph function:
 *   t0 = maxc_rt_profile_begin();  ...kernel...;  maxc_rt_profile_end(&counters[k], t0);
 * and NAME_run_packed calls maxc_rt_profile_run() once per run. Kernels run
 * one after another on the calling thread (their tasks go to the pool), so
 * the counters need no atomics; a profile build counts one run at a time. */

typedef struct {
  int64_t ns;      /* wall time summed over the calls (CLOCK_MONOTONIC) */
  int64_t calls;   /* times the kernel ran (a subgraph's kernel: once per call) */
  int64_t threads; /* most threads a job of the kernel ran on; -1: the program's parallel-for */
} maxc_rt_profile_counter;

void *malloc(unsigned long size);
void free(void *p);
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wbuiltin-requires-header" /* FILE is opaque here */
int fprintf(void *stream, const char *format, ...);
#pragma clang diagnostic pop

static int64_t maxc_rt_profile_threads_now; /* the running kernel's, so far */
static int64_t maxc_rt_profile_runs;

static void maxc_rt_profile_job_threads(int64_t threads) {
  if (threads < 0 || maxc_rt_profile_threads_now < 0)
    maxc_rt_profile_threads_now = -1;
  else if (threads > maxc_rt_profile_threads_now)
    maxc_rt_profile_threads_now = threads;
}

int64_t maxc_rt_profile_begin(void) {
  maxc_rt_profile_threads_now = 1;
  return maxc_rt_now_ns();
}

void maxc_rt_profile_end(maxc_rt_profile_counter *c, int64_t t0) {
  c->ns += maxc_rt_now_ns() - t0;
  c->calls += 1;
  if (c->threads >= 0 && (maxc_rt_profile_threads_now < 0 || maxc_rt_profile_threads_now > c->threads))
    c->threads = maxc_rt_profile_threads_now;
}

void maxc_rt_profile_run(void) { ++maxc_rt_profile_runs; }

void maxc_rt_profile_reset(maxc_rt_profile_counter *c, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    c[k].ns = 0;
    c[k].calls = 0;
    c[k].threads = 0;
  }
  maxc_rt_profile_runs = 0;
}

/* NAME_profile_report(file): the kernels that ran, most time first. `about`
 * holds one "KERNEL\tGRAPH\tNODES" line per kernel (made at compile time).
 * Columns (tab-separated after the header lines): rank, ms per run, share of
 * the kernels' total, calls per run, threads, kernel, graph, nodes. */
void maxc_rt_profile_report(void *file, const maxc_rt_profile_counter *c, const char *const *about, int64_t n,
                            const char *model) {
  int64_t runs = maxc_rt_profile_runs > 0 ? maxc_rt_profile_runs : 1, total = 0, ran = 0;
  for (int64_t k = 0; k < n; ++k) {
    total += c[k].ns;
    ran += c[k].calls > 0;
  }
  fprintf(file, "# maxc profile of %s: %lld run(s), %.3f ms per run in %lld kernels\n", model,
          (long long)maxc_rt_profile_runs, (double)total / runs / 1e6, (long long)ran);
  fprintf(file, "# rank\tms/run\tshare\tcalls/run\tthreads\tkernel\tgraph\tnodes\n");
  int64_t *order = (int64_t *)malloc((unsigned long)(n > 0 ? n : 1) * sizeof(int64_t));
  if (!order)
    return;
  int64_t m = 0;
  for (int64_t k = 0; k < n; ++k)
    if (c[k].calls > 0)
      order[m++] = k;
  for (int64_t i = 1; i < m; ++i) { /* insertion sort: most time first, then kernel order */
    int64_t k = order[i], j = i;
    for (; j > 0 && c[order[j - 1]].ns < c[k].ns; --j)
      order[j] = order[j - 1];
    order[j] = k;
  }
  for (int64_t i = 0; i < m; ++i) {
    const maxc_rt_profile_counter *x = &c[order[i]];
    char threads[24];
    if (x->threads < 0) {
      threads[0] = 'e', threads[1] = 'x', threads[2] = 't', threads[3] = 0;
    } else {
      int64_t t = x->threads, len = 0;
      char digits[24];
      do
        digits[len++] = (char)('0' + t % 10);
      while ((t /= 10) > 0);
      for (int64_t d = 0; d < len; ++d)
        threads[d] = digits[len - 1 - d];
      threads[len] = 0;
    }
    fprintf(file, "%lld\t%.3f\t%.1f%%\t%.4g\t%s\t%s\n", (long long)(i + 1), (double)x->ns / runs / 1e6,
            total > 0 ? 100.0 * (double)x->ns / (double)total : 0.0, (double)x->calls / runs, threads, about[order[i]]);
  }
  free(order);
}
