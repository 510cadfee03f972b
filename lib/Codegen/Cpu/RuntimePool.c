/* lib/Codegen/Cpu/RuntimePool.c: the thread pool every CPU artifact carries.
 *
 * Compiled when maxc is built (clang from the same LLVM, -O2 -emit-llvm; see
 * lib/CMakeLists.txt), embedded in maxc as bitcode and linked into each
 * model's module by link_cpu_runtime (Cpu/Runtime.cpp), which renames
 *   maxc_rt_set_num_threads  -> NAME_set_num_threads   (exported)
 *   maxc_rt_set_parallel_for -> NAME_set_parallel_for  (exported)
 *   maxc_rt_set_communicator -> NAME_set_communicator  (exported)
 *   everything else          -> NAME.rt.*              (internal)
 * so each model in a program has a pool of its own.
 *
 * The bitcode must suit every target maxc emits for (x86-64 and aarch64
 * Linux, both LP64): no system header is included, the few libc functions
 * are declared here, and pthread's mutex and condition variable live in
 * 64-byte opaque buffers (larger than glibc's or musl's on either
 * architecture) initialized by pthread_*_init. Link.cpp drops the triple,
 * data layout and CPU attributes, which the model's target then supplies.
 *
 * Generated code calls maxc_rt_parallel_for(ctx, count, task, work):
 * task(ctx, i) for every i in [0, count), `work` the job's estimated work
 * from the shapes (emit_parallel_for, Cpu/Runtime.h). It runs them
 *   - through the program's parallel-for, if it installed one;
 *   - else on the calling thread if the job is small (below
 *     MAXC_RT_MIN_WORK) and the workers are not hot (no pool job ended in
 *     the last MAXC_RT_SPIN_NS, so they have stopped spinning): see below;
 *   - else on the pool (NAME_set_num_threads(n), n > 1): thread k of the
 *     n (the caller is 0, worker k is k) owns the k-th of n equal
 *     consecutive ranges of the indices and runs them in order, one claim
 *     per index from its own range's atomic word (a cache line of its own:
 *     no line bounces between cores while every thread has work); a thread
 *     whose range is empty then steals runs of a quarter of what is left
 *     (at least one) from the back of the others' ranges, so the threads
 *     finish together. Consecutive kernels split the same way (rows of a
 *     conv, then of the pool after it) thus keep each part of the data on
 *     one core: at 2 threads the caller's core runs every job's first half
 *     and the worker's core its second half, and only the halves' borders
 *     (and stolen tails) cross between cores. (Before session 10 threads
 *     claimed guided runs from one shared counter, which interleaved the
 *     threads' parts of each job and moved about half of every kernel's
 *     input between cores: ResNet-18 at 2 threads, bench/harness_ab.py,
 *     was 4 % slower.) Indices past 2^31 - 1 do not fit a range word: such
 *     a job runs on the calling thread;
 *   - else, or while another thread's call holds the pool, in a loop here.
 * Which thread runs an index never changes what it computes: the task split
 * is decided by the generated code from the shapes alone, so results are the
 * same bits whatever the thread count.
 *
 * Small jobs (session 14). On the 2-core VM of docs/PERFORMANCE.md a hand-off
 * costs the caller a few microseconds of cache-line round trips (one way
 * 50-250 ns), and it leaves the job's output half in the other core's
 * cache, which a following kernel on the caller reads back line by line:
 * the PaddleOCR direction classifier, whose ~45 jobs are all 1-30 us, ran
 * 0.36 ms on one thread and 0.49 ms on two. A job below MAXC_RT_MIN_WORK
 * (~40 us of work) therefore starts no hand-off: it runs on the caller
 * unless a pool job ended less than MAXC_RT_SPIN_NS ago, i.e. the workers
 * are still spinning and the data of the kernels around it is already
 * split between the cores (the small kernels between a large model's large
 * ones: run alone, they made the PP-OCRv4 recognizer 8 % slower at 2
 * threads). A model of small kernels thus runs on one thread and never
 * wakes a worker; a large one keeps its workers hot.
 *
 * Measured hand-offs (session 31). The cost of a hand-off is not a
 * constant of the CPU: the same 2-vCPU VM (Zen 5) measured 211-248 ns one
 * way between its vCPUs (bench/core_latency.c: cores on two core
 * complexes) for the rest of a session in which three sub-millisecond
 * models ran 10-30 % slower on two threads than on one, where minutes
 * before the same binaries had run them 1.7x faster on two. So the pool
 * measures it: worker 1, when a job's publication ends its spin (it was
 * waiting before the job was published), notes when it saw the job; the
 * caller, once the job is
 * closed, takes the time since it published as a sample (120-150 ns in the
 * slow state, 80 ns while core_latency read 58 ns one way: the clock reads
 * on two cores, not a ping-pong's round trip), and every
 * MAXC_RT_SAMPLES samples their minimum sets the threshold between
 * MAXC_RT_MIN_WORK (a near core) and MAXC_RT_FAR_MIN_WORK (a far one:
 * 2^23 ran those models at 0.99-1.03 of their one-thread time, the MLP at
 * batch 64 still 1.8x faster; but oww_embedding, whose jobs lie between
 * the two, then runs on one thread: ORT/maxc 0.95 at two threads there).
 * Only the thread count's decision depends on it, never what a task
 * computes. Tried and not kept: hot workers taking
 * only jobs of 2^21 or more while far — the small models then ran at
 * 0.99-1.02 of their one-thread time, but the large ones lost 10-25 % of
 * their two-thread speed (ppocr_det 0.51 -> 0.62 of one thread, yolov8n
 * 0.60 -> 0.69), so YOLOv10 and face_landmark stay 0-7 % slower on two
 * threads in some runs while far (docs/PERFORMANCE.md, session 31).
 *
 * Waiting threads spin with the CPU's spin-wait hint (maxc_rt_relax: x86
 * pause, aarch64 yield; no system call) for MAXC_RT_SPIN_NS, then poll
 * with sched_yield until MAXC_RT_POLL_NS have passed since they started
 * waiting, then sleep on a condition variable: an idle pool costs no CPU.
 * A model's next parallel kernel is usually within that window, and a
 * worker that is awake joins it in under a microsecond, where one woken
 * from sleep takes 30-50 us. (Before session 14 the spin was 4096 plain
 * loads, ~1 us, and the sched_yield polling lasted 0.5 ms: a system call
 * costs ~1 us in this VM, and those calls were 12 % of a 2-thread run's
 * samples.) The caller takes the mutex and broadcasts only when a worker
 * sleeps, and a worker signals the caller only when it sleeps (`sleepers`,
 * `caller_sleeps`), so a job between awake threads makes no system call;
 * the polled words and the job's fields sit on cache lines of their own.
 * A call waits for its tasks, not for the workers: one that wakes late
 * (descheduled on a busy machine) finds the job closed and goes back to
 * waiting. Workers start at the first pooled call after
 * NAME_set_num_threads(n > 1) and are joined by
 * NAME_set_num_threads(1) (or any change of n). */
#include <stdatomic.h>
#include <stdint.h>

typedef void (*maxc_rt_task_fn)(void *ctx, int64_t i);
typedef void (*maxc_rt_parallel_for_fn)(void *ctx, int64_t count, maxc_rt_task_fn task);

/* libc (pthread is part of glibc >= 2.34 and musl; older glibc: -lpthread). */
typedef unsigned long maxc_rt_thread;
int pthread_create(maxc_rt_thread *thread, const void *attr, void *(*start)(void *), void *arg);
int pthread_join(maxc_rt_thread thread, void **result);
int pthread_mutex_init(void *mutex, const void *attr);
int pthread_mutex_destroy(void *mutex);
int pthread_mutex_lock(void *mutex);
int pthread_mutex_unlock(void *mutex);
int pthread_cond_init(void *cond, const void *attr);
int pthread_cond_destroy(void *cond);
int pthread_cond_wait(void *cond, void *mutex);
int pthread_cond_broadcast(void *cond);
int pthread_cond_signal(void *cond);

typedef struct {
  _Alignas(16) unsigned char bytes[64];
} maxc_rt_sync;

int sched_yield(void);
/* struct timespec on LP64 Linux (glibc and musl): two 64-bit fields. */
typedef struct {
  long sec, nsec;
} maxc_rt_timespec;
int clock_gettime(int clock, maxc_rt_timespec *t);
#define MAXC_RT_CLOCK_MONOTONIC 1

/* The CPU's spin-wait hint (x86 pause, aarch64 yield): link_cpu_runtime
 * (Cpu/Runtime.cpp) gives it a body for the model's target. */
void maxc_rt_relax(void);

#define MAXC_RT_MAX_THREADS 256
/* A job of less estimated work than the threshold (the `work` of
 * maxc_rt_parallel_for: about one multiply-add or one element operation a
 * unit; 30-100 units a nanosecond on one core of the VM) runs on the
 * calling thread unless the workers are hot (see "Small jobs" above). The
 * threshold is MAXC_RT_MIN_WORK while the measured hand-off latency (see
 * "Measured hand-offs" above) is at most MAXC_RT_NEAR_NS,
 * MAXC_RT_FAR_MIN_WORK from MAXC_RT_FAR_NS on, linear between; it is
 * updated from the minimum of every MAXC_RT_SAMPLES samples. */
#define MAXC_RT_MIN_WORK (1 << 21)
#define MAXC_RT_FAR_MIN_WORK (1 << 23)
#define MAXC_RT_NEAR_NS 85
#define MAXC_RT_FAR_NS 115
#define MAXC_RT_SAMPLES 16
/* Waiting threads spin (with maxc_rt_relax, no system call) for
 * MAXC_RT_SPIN_NS, then poll with sched_yield until MAXC_RT_POLL_NS from the
 * start of the wait, then sleep. */
#define MAXC_RT_SPIN_NS 50000
#define MAXC_RT_POLL_NS 200000
/* The job's state word: this bit once the job takes no more workers, the
 * low bits count the workers inside it. */
#define MAXC_RT_CLOSED (1ull << 63)

/* Fields on cache lines of their own by who writes them when: the job
 * (written by the caller before it bumps `generation`, read by the workers
 * after), the state and finished counters (written by every thread of a
 * job), the sleepers (written when a thread goes to sleep). */
static struct {
  maxc_rt_sync mutex, wake, done;
  int sync_ready;  /* mutex and conditions initialized */
  int wanted;      /* NAME_set_num_threads */
  int workers;     /* started */
  maxc_rt_thread threads[MAXC_RT_MAX_THREADS];
  _Alignas(64) atomic_int busy; /* a call is running on the pool */
  atomic_int stop;
  uint_fast64_t start_generation; /* the generation new workers have seen */
  _Alignas(64) atomic_uint_fast64_t generation; /* bumped for each job (and to stop) */
  void *ctx;
  int64_t count;
  int job_threads; /* the job's ranges: workers + 1 */
  maxc_rt_task_fn task;
  _Alignas(64) atomic_uint_fast64_t state; /* MAXC_RT_CLOSED | workers inside the job */
  _Alignas(64) atomic_uint_fast64_t finished; /* the job's tasks done */
  atomic_int_fast64_t sample_wait, sample_seen; /* worker 1: when it began waiting, when it saw the job (ns) */
  _Alignas(64) atomic_int sleepers;           /* workers waiting on `wake` */
  atomic_int caller_sleeps;                   /* the caller waits on `done` */
  _Alignas(64) atomic_int_fast64_t last_end;  /* when the last pool job ended (ns) */
  atomic_int_fast64_t min_work; /* the small-job threshold now (0: MAXC_RT_MIN_WORK) */
  int64_t window_min, window_samples; /* the hand-off latencies sampled since the last update */
} maxc_rt_pool = {.state = MAXC_RT_CLOSED};

/* Thread k's range of the job's indices, [low 32 bits, high 32 bits), each
 * on a cache line of its own. */
static struct {
  _Alignas(64) atomic_uint_fast64_t range;
} maxc_rt_ranges[MAXC_RT_MAX_THREADS + 1];
#define MAXC_RT_RANGE(lo, hi) ((uint_fast64_t)(lo) | (uint_fast64_t)(hi) << 32)

static maxc_rt_parallel_for_fn maxc_rt_user_parallel_for;

#ifdef MAXC_RT_PROFILE
/* Profile builds (maxc compile --profile, maxc profile): the threads that
 * ran tasks of the current pool job. RuntimeProfile.c has the rest. */
static atomic_int maxc_rt_profile_participants;
static void maxc_rt_profile_job_threads(int64_t threads);
#endif

static int64_t maxc_rt_now_ns(void) {
  maxc_rt_timespec t;
  clock_gettime(MAXC_RT_CLOCK_MONOTONIC, &t);
  return (int64_t)t.sec * 1000000000 + t.nsec;
}

/* Waits, without sleeping, while *word == value (equal: 1) or *word < value
 * (equal: 0): spins with maxc_rt_relax for MAXC_RT_SPIN_NS (the clock read
 * every 64 polls), then polls with sched_yield until MAXC_RT_POLL_NS have
 * passed. Returns the last value read; the caller sleeps if the wait is not
 * over. */
static uint_fast64_t maxc_rt_poll(atomic_uint_fast64_t *word, uint_fast64_t value, int equal, int64_t *spun) {
  uint_fast64_t w = atomic_load_explicit(word, memory_order_acquire);
#define MAXC_RT_WAITING (equal ? w == value : w < value)
  if (!MAXC_RT_WAITING)
    return w;
  int64_t start = maxc_rt_now_ns(), waited = 0;
  while (MAXC_RT_WAITING && waited < MAXC_RT_SPIN_NS) {
    for (int spin = 0; MAXC_RT_WAITING && spin < 64; ++spin) {
      maxc_rt_relax();
      w = atomic_load_explicit(word, memory_order_acquire);
    }
    waited = maxc_rt_now_ns() - start;
  }
  if (spun && !MAXC_RT_WAITING && waited < MAXC_RT_SPIN_NS) {
    spun[0] = start;
    spun[1] = maxc_rt_now_ns();
  }
  while (MAXC_RT_WAITING && waited < MAXC_RT_POLL_NS) {
    sched_yield();
    w = atomic_load_explicit(word, memory_order_acquire);
    waited = maxc_rt_now_ns() - start;
  }
#undef MAXC_RT_WAITING
  return w;
}

/* Takes indices [*i0, *i1) from range k: the next one from the front
 * (own) or a quarter of what is left, at least one, from the back (steal).
 * Returns 0 once the range is empty. */
static int maxc_rt_claim(int k, int own, int64_t *i0, int64_t *i1) {
  atomic_uint_fast64_t *word = &maxc_rt_ranges[k].range;
  uint_fast64_t r = atomic_load_explicit(word, memory_order_relaxed);
  for (;;) {
    int64_t lo = (int64_t)(r & 0xffffffffu), hi = (int64_t)(r >> 32);
    if (lo >= hi)
      return 0;
    int64_t take = own ? 1 : (hi - lo + 3) / 4;
    *i0 = own ? lo : hi - take;
    *i1 = *i0 + take;
    if (atomic_compare_exchange_weak(word, &r, own ? MAXC_RT_RANGE(lo + 1, hi) : MAXC_RT_RANGE(lo, hi - take)))
      return 1;
  }
}

/* Thread `self` runs its own range, then steals from the others' until
 * every range is empty; returns whether it finished the job's last task. */
static int maxc_rt_drain(int self) {
  void *ctx = maxc_rt_pool.ctx;
  int n = maxc_rt_pool.job_threads;
  maxc_rt_task_fn task = maxc_rt_pool.task;
  int64_t mine = 0, i0, i1;
  for (int d = 0; d < n; ++d) {
    int k = (self + d) % n;
    while (maxc_rt_claim(k, d == 0, &i0, &i1)) {
      for (int64_t j = i0; j < i1; ++j)
        task(ctx, j);
      mine += i1 - i0;
    }
  }
#ifdef MAXC_RT_PROFILE
  if (mine > 0) /* before `finished`: the caller reads it once every task is done */
    atomic_fetch_add_explicit(&maxc_rt_profile_participants, 1, memory_order_relaxed);
#endif
  return mine > 0 && atomic_fetch_add(&maxc_rt_pool.finished, (uint_fast64_t)mine) + (uint_fast64_t)mine == (uint_fast64_t)maxc_rt_pool.count;
}

/* A worker waits for a job, joins it unless it is closed (its tasks all
 * taken: a worker that wakes late never holds the caller up), helps drain
 * it and leaves. The caller publishes the next job only once the last one
 * is closed and empty, so a joined worker reads stable job fields.
 * Sleeping and waking pair up through seq_cst operations on both sides: a
 * worker counts itself in `sleepers` before it reads `generation` (under
 * the mutex), the caller bumps `generation` before it reads `sleepers`, so
 * either the worker sees the new job or the caller sees the sleeper and
 * broadcasts (the same between the caller's `caller_sleeps` and a worker's
 * `finished`). No job takes the mutex while every thread is awake. */
static void *maxc_rt_worker(void *arg) {
  int self = (int)(uintptr_t)arg; /* 1 .. workers */
  uint_fast64_t seen = maxc_rt_pool.start_generation;
  for (;;) {
    int64_t spun[2] = {0, 0};
    uint_fast64_t g = maxc_rt_poll(&maxc_rt_pool.generation, seen, 1, self == 1 ? spun : 0);
    if (g == seen) {
      pthread_mutex_lock(&maxc_rt_pool.mutex);
      atomic_fetch_add(&maxc_rt_pool.sleepers, 1);
      while ((g = atomic_load(&maxc_rt_pool.generation)) == seen)
        pthread_cond_wait(&maxc_rt_pool.wake, &maxc_rt_pool.mutex);
      atomic_fetch_sub(&maxc_rt_pool.sleepers, 1);
      pthread_mutex_unlock(&maxc_rt_pool.mutex);
    }
    if (atomic_load(&maxc_rt_pool.stop))
      return 0;
    seen = g;
    uint_fast64_t s = atomic_load(&maxc_rt_pool.state);
    while (!(s & MAXC_RT_CLOSED) && !atomic_compare_exchange_weak(&maxc_rt_pool.state, &s, s + 1)) {
    }
    if (s & MAXC_RT_CLOSED)
      continue;
    if (spun[1] != 0) { /* read by the caller once the job is closed */
      atomic_store_explicit(&maxc_rt_pool.sample_wait, spun[0], memory_order_relaxed);
      atomic_store_explicit(&maxc_rt_pool.sample_seen, spun[1], memory_order_relaxed);
    }
    if (maxc_rt_drain(self) && atomic_load(&maxc_rt_pool.caller_sleeps)) {
      pthread_mutex_lock(&maxc_rt_pool.mutex);
      pthread_cond_signal(&maxc_rt_pool.done);
      pthread_mutex_unlock(&maxc_rt_pool.mutex);
    }
    atomic_fetch_sub(&maxc_rt_pool.state, 1);
  }
}

static void maxc_rt_join_workers(void) {
  if (maxc_rt_pool.workers == 0)
    return;
  pthread_mutex_lock(&maxc_rt_pool.mutex);
  atomic_store(&maxc_rt_pool.stop, 1);
  atomic_fetch_add(&maxc_rt_pool.generation, 1);
  pthread_cond_broadcast(&maxc_rt_pool.wake);
  pthread_mutex_unlock(&maxc_rt_pool.mutex);
  for (int i = 0; i < maxc_rt_pool.workers; ++i)
    pthread_join(maxc_rt_pool.threads[i], 0);
  maxc_rt_pool.workers = 0;
  atomic_store(&maxc_rt_pool.stop, 0);
}

/* NAME_set_num_threads(n): run parallel kernels on n threads (the caller and
 * n - 1 workers, started at the next run); n <= 1 joins the workers. Not to
 * be called while a run is in progress. */
void maxc_rt_set_num_threads(int32_t n) {
  if (n < 1)
    n = 1;
  if (n > MAXC_RT_MAX_THREADS + 1)
    n = MAXC_RT_MAX_THREADS + 1;
  if (n == maxc_rt_pool.wanted)
    return;
  maxc_rt_join_workers();
  maxc_rt_pool.wanted = n;
  if (n > 1 && !maxc_rt_pool.sync_ready) {
    pthread_mutex_init(&maxc_rt_pool.mutex, 0);
    pthread_cond_init(&maxc_rt_pool.wake, 0);
    pthread_cond_init(&maxc_rt_pool.done, 0);
    maxc_rt_pool.sync_ready = 1;
  }
}

/* NAME_set_parallel_for(fn): the program's own parallel-for replaces the
 * pool (NULL: back to the pool, or one thread). */
void maxc_rt_set_parallel_for(maxc_rt_parallel_for_fn fn) { maxc_rt_user_parallel_for = fn; }

/* The small-job threshold now: MAXC_RT_MIN_WORK until the hand-offs have
 * been measured (maxc_rt_sample_latency). */
static int64_t maxc_rt_min_work(void) {
  int64_t w = atomic_load_explicit(&maxc_rt_pool.min_work, memory_order_relaxed);
  return w > 0 ? w : MAXC_RT_MIN_WORK;
}

/* After a pool job published at `published` (ns): worker 1's hand-off
 * latency, if it was spinning when the job came (it began waiting before
 * the job was published); every MAXC_RT_SAMPLES samples, their minimum
 * sets the threshold. */
static void maxc_rt_sample_latency(int64_t published) {
  int64_t wait = atomic_load_explicit(&maxc_rt_pool.sample_wait, memory_order_relaxed);
  int64_t seen = atomic_load_explicit(&maxc_rt_pool.sample_seen, memory_order_relaxed);
  if (seen == 0)
    return;
  atomic_store_explicit(&maxc_rt_pool.sample_seen, 0, memory_order_relaxed);
  if (wait >= published || seen < published)
    return;
  int64_t latency = seen - published;
  if (maxc_rt_pool.window_samples == 0 || latency < maxc_rt_pool.window_min)
    maxc_rt_pool.window_min = latency;
  if (++maxc_rt_pool.window_samples < MAXC_RT_SAMPLES)
    return;
  int64_t over = maxc_rt_pool.window_min - MAXC_RT_NEAR_NS, span = MAXC_RT_FAR_NS - MAXC_RT_NEAR_NS;
  over = over < 0 ? 0 : over > span ? span : over;
  atomic_store_explicit(&maxc_rt_pool.min_work, MAXC_RT_MIN_WORK + (MAXC_RT_FAR_MIN_WORK - MAXC_RT_MIN_WORK) / span * over,
                        memory_order_relaxed);
  maxc_rt_pool.window_samples = 0;
}

/* Whether no pool job ended in the last MAXC_RT_SPIN_NS (the workers have
 * stopped spinning); no clock read while the pool never ran one. */
static int maxc_rt_workers_cold(void) {
  int64_t last = atomic_load_explicit(&maxc_rt_pool.last_end, memory_order_relaxed);
  return last == 0 || maxc_rt_now_ns() - last > MAXC_RT_SPIN_NS;
}

/* task(ctx, i) for i in [0, count); `work`: the job's estimated work in the
 * units of MAXC_RT_MIN_WORK (the generated code's estimate from the shapes;
 * negative: unknown, as large). */
void maxc_rt_parallel_for(void *ctx, int64_t count, maxc_rt_task_fn task, int64_t work) {
  maxc_rt_parallel_for_fn user = maxc_rt_user_parallel_for;
  if (user) {
    user(ctx, count, task);
#ifdef MAXC_RT_PROFILE
    maxc_rt_profile_job_threads(-1); /* the program's parallel-for: not known */
#endif
    return;
  }
  /* A small job while no pool job has ever ended runs on the caller. This
   * test comes first and reads the same word at every thread count, so a
   * model whose jobs are all small executes the same instructions at 1
   * thread and at n (issue 22: a second thread never makes a model slower;
   * checking the thread count first made the 2-thread path a few
   * instructions longer per job: 0.1-0.3 % of a 6 us model). */
  int64_t min_work = maxc_rt_min_work();
  if (work >= 0 && work < min_work && atomic_load_explicit(&maxc_rt_pool.last_end, memory_order_relaxed) == 0) {
    for (int64_t i = 0; i < count; ++i)
      task(ctx, i);
    return;
  }
  int expected = 0;
  if (count < 2 || count > 0x7fffffff || maxc_rt_pool.wanted < 2 ||
      (work >= 0 && work < min_work && maxc_rt_workers_cold()) ||
      !atomic_compare_exchange_strong(&maxc_rt_pool.busy, &expected, 1)) {
    for (int64_t i = 0; i < count; ++i)
      task(ctx, i);
    return;
  }
  /* The pool is ours until busy is 0 again. */
  maxc_rt_pool.start_generation = atomic_load(&maxc_rt_pool.generation);
  while (maxc_rt_pool.workers < maxc_rt_pool.wanted - 1) {
    int w = maxc_rt_pool.workers;
    if (pthread_create(&maxc_rt_pool.threads[w], 0, maxc_rt_worker, (void *)(uintptr_t)(w + 1)) != 0) {
      maxc_rt_pool.wanted = w + 1; /* fewer threads than asked: run with those */
      break;
    }
    maxc_rt_pool.workers = w + 1;
  }
  if (maxc_rt_pool.workers == 0) {
    atomic_store(&maxc_rt_pool.busy, 0);
    for (int64_t i = 0; i < count; ++i)
      task(ctx, i);
    return;
  }
  /* Publish: the fields, then open the job (state 0), then wake. */
  maxc_rt_pool.ctx = ctx;
  maxc_rt_pool.count = count;
  maxc_rt_pool.job_threads = maxc_rt_pool.workers + 1;
  maxc_rt_pool.task = task;
  for (int k = 0; k < maxc_rt_pool.job_threads; ++k)
    atomic_store_explicit(&maxc_rt_ranges[k].range,
                          MAXC_RT_RANGE(count * k / maxc_rt_pool.job_threads, count * (k + 1) / maxc_rt_pool.job_threads),
                          memory_order_relaxed);
  atomic_store(&maxc_rt_pool.finished, 0);
#ifdef MAXC_RT_PROFILE
  atomic_store(&maxc_rt_profile_participants, 0);
#endif
  atomic_store(&maxc_rt_pool.state, 0);
  int64_t published = maxc_rt_now_ns();
  atomic_fetch_add(&maxc_rt_pool.generation, 1);
  if (atomic_load(&maxc_rt_pool.sleepers) > 0) {
    pthread_mutex_lock(&maxc_rt_pool.mutex);
    pthread_cond_broadcast(&maxc_rt_pool.wake);
    pthread_mutex_unlock(&maxc_rt_pool.mutex);
  }
  maxc_rt_drain(0);
  /* Every task done (those workers took too)... */
  if (maxc_rt_poll(&maxc_rt_pool.finished, (uint_fast64_t)count, 0, 0) < (uint_fast64_t)count) {
    pthread_mutex_lock(&maxc_rt_pool.mutex);
    atomic_store(&maxc_rt_pool.caller_sleeps, 1);
    while (atomic_load(&maxc_rt_pool.finished) < (uint_fast64_t)count)
      pthread_cond_wait(&maxc_rt_pool.done, &maxc_rt_pool.mutex);
    atomic_store(&maxc_rt_pool.caller_sleeps, 0);
    pthread_mutex_unlock(&maxc_rt_pool.mutex);
  }
  /* ...then close the job and let the workers inside it leave (they find
   * no task left). Workers still asleep or late are not waited for. */
  atomic_fetch_or(&maxc_rt_pool.state, MAXC_RT_CLOSED);
  for (int spin = 0; atomic_load(&maxc_rt_pool.state) != MAXC_RT_CLOSED; ++spin)
    if (spin < 4096)
      maxc_rt_relax();
    else
      sched_yield();
  int64_t end = maxc_rt_now_ns();
  maxc_rt_sample_latency(published);
  atomic_store_explicit(&maxc_rt_pool.last_end, end, memory_order_relaxed);
  atomic_store(&maxc_rt_pool.busy, 0);
#ifdef MAXC_RT_PROFILE
  maxc_rt_profile_job_threads(atomic_load(&maxc_rt_profile_participants));
#endif
}

/* Tensor parallelism (docs/tensor-parallel.md): one rank's program calls
 * the collectives of the communicator the program installed with
 * NAME_set_communicator (maxc_comm in the model's header: the same layout).
 * A collective that cannot run (none installed, a communicator of another
 * world size, or one that returns nonzero) records the first failure and
 * makes every later collective of the run a no-op; the run's entry point
 * then returns NAME_ERROR_COLLECTIVE (maxc_rt_take_comm_status). */
typedef struct {
  int32_t rank, world;
  void *ctx;
  int32_t (*all_reduce_sum_f32)(void *ctx, float *data, int64_t count);
  int32_t (*all_gather)(void *ctx, const void *in, void *out, int64_t bytes);
} maxc_rt_comm;

void *malloc(unsigned long size);
void free(void *p);
void *memcpy(void *dst, const void *src, unsigned long n);

static const maxc_rt_comm *maxc_rt_communicator;
static int32_t maxc_rt_comm_failed; /* one run of a rank at a time: its collectives pair with the other ranks' */

void maxc_rt_set_communicator(const maxc_rt_comm *comm) { maxc_rt_communicator = comm; }

static const maxc_rt_comm *maxc_rt_comm_for(int32_t world) {
  const maxc_rt_comm *c = maxc_rt_communicator;
  if (maxc_rt_comm_failed)
    return 0;
  if (!c || c->world != world || c->rank < 0 || c->rank >= world) {
    maxc_rt_comm_failed = 1;
    return 0;
  }
  return c;
}

/* data[0..count) summed over the ranks, in place. */
void maxc_rt_all_reduce_f32(float *data, int64_t count, int32_t world) {
  const maxc_rt_comm *c = maxc_rt_comm_for(world);
  if (c && c->all_reduce_sum_f32(c->ctx, data, count) != 0)
    maxc_rt_comm_failed = 1;
}

/* Every rank's `outer` chunks of `chunk` bytes (its piece of a value split
 * along an axis: outer = the product of the dims before it) put side by
 * side along that axis: out is [outer][world][chunk]. */
void maxc_rt_all_gather(const void *in, void *out, int64_t outer, int64_t chunk, int32_t world) {
  const maxc_rt_comm *c = maxc_rt_comm_for(world);
  if (!c)
    return;
  int64_t piece = outer * chunk;
  if (outer == 1) {
    if (c->all_gather(c->ctx, in, out, piece) != 0)
      maxc_rt_comm_failed = 1;
    return;
  }
  unsigned char *all = (unsigned char *)malloc((unsigned long)(piece * world));
  if (!all || c->all_gather(c->ctx, in, all, piece) != 0) {
    maxc_rt_comm_failed = 1;
    free(all);
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int32_t r = 0; r < world; ++r)
      memcpy((unsigned char *)out + (o * world + r) * chunk, all + r * piece + o * chunk, (unsigned long)chunk);
  free(all);
}

/* The run's collective status (0: none failed), reset for the next run. */
int32_t maxc_rt_take_comm_status(void) {
  int32_t s = maxc_rt_comm_failed;
  maxc_rt_comm_failed = 0;
  return s;
}

/* top_k of f32 rows (Ops/TopK.h): each row's k first elements, largest
 * (or smallest) first, ties by the lower index, NaN above every number;
 * values and indices written [rows, k] (either may be null: not stored).
 * A heap of the k best so far with the worst at its root, O(n log k) per
 * row, then heapsort: best first. The indices row is the heap when given. */
static int maxc_rt_topk_before(const float *x, int64_t a, int64_t b, int32_t largest) {
  float va = x[a], vb = x[b];
  int na = va != va, nb = vb != vb;
  if (na || nb)
    return na && nb ? a < b : (largest ? na : nb);
  return largest ? (va > vb || (va == vb && a < b)) : (va < vb || (va == vb && a < b));
}

/* Sifts heap[at] down a heap of `size` whose root is the element every
 * other ranks before (the worst). */
static void maxc_rt_topk_sift(const float *x, int64_t *heap, int64_t size, int64_t at, int32_t largest) {
  for (;;) {
    int64_t worst = at, l = 2 * at + 1, r = l + 1;
    if (l < size && maxc_rt_topk_before(x, heap[worst], heap[l], largest))
      worst = l;
    if (r < size && maxc_rt_topk_before(x, heap[worst], heap[r], largest))
      worst = r;
    if (worst == at)
      return;
    int64_t t = heap[at];
    heap[at] = heap[worst];
    heap[worst] = t;
    at = worst;
  }
}

void maxc_rt_top_k_f32(const float *x, int64_t rows, int64_t n, int64_t k, int32_t largest, float *values,
                       int64_t *indices) {
  if (k <= 0 || k > n)
    return;
  int64_t *scratch = indices ? 0 : (int64_t *)malloc((unsigned long)(k * 8));
  if (!indices && !scratch)
    return;
  for (int64_t row = 0; row < rows; ++row) {
    const float *xr = x + row * n;
    int64_t *heap = indices ? indices + row * k : scratch;
    for (int64_t i = 0; i < k; ++i)
      heap[i] = i;
    for (int64_t i = k / 2; i-- > 0;)
      maxc_rt_topk_sift(xr, heap, k, i, largest);
    for (int64_t i = k; i < n; ++i)
      if (maxc_rt_topk_before(xr, i, heap[0], largest)) {
        heap[0] = i;
        maxc_rt_topk_sift(xr, heap, k, 0, largest);
      }
    for (int64_t end = k - 1; end > 0; --end) { /* the worst to the back: best first */
      int64_t t = heap[0];
      heap[0] = heap[end];
      heap[end] = t;
      maxc_rt_topk_sift(xr, heap, end, 0, largest);
    }
    if (values)
      for (int64_t i = 0; i < k; ++i)
        values[row * k + i] = xr[heap[i]];
  }
  free(scratch);
}

#ifdef MAXC_RT_PROFILE
#include "RuntimeProfile.c"
#endif
