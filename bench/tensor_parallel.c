/* bench/tensor_parallel.c: the Llama example's prefill, 1 rank x 2 threads
 * (the whole model on its own pool) against 2 ranks x 1 thread (the
 * tensor-parallel rank programs on two threads of this process, a
 * shared-memory communicator), alternating, with the time the ranks spend
 * in their collectives. Built and run by bench/tensor_parallel.py. */
#define _POSIX_C_SOURCE 200809L
#include "llama.h"
#include "llama_rank0.h"
#include "llama_rank1.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WORLD = 2, VOCAB = LLAMA_OUTPUT_LOGITS_DIM2 };

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* A spinning barrier among the two ranks (each on a core of its own). */
static atomic_int arrived, generation;
static void spin_barrier(void) {
  int gen = atomic_load(&generation);
  if (atomic_fetch_add(&arrived, 1) == WORLD - 1) {
    atomic_store(&arrived, 0);
    atomic_fetch_add(&generation, 1);
  } else {
    while (atomic_load(&generation) == gen)
      ;
  }
}

static const void *slot[WORLD];
static double comm_ms[WORLD];
static int comm_calls[WORLD];

typedef struct {
  int rank;
} ctx_t;

static int32_t all_reduce(void *c, float *data, int64_t count) {
  int r = ((ctx_t *)c)->rank;
  double t0 = now_ms();
  float *sum = malloc((size_t)count * sizeof(float) + 1);
  slot[r] = data;
  spin_barrier();
  for (int64_t i = 0; i < count; ++i) {
    float s = 0;
    for (int k = 0; k < WORLD; ++k)
      s += ((const float *)slot[k])[i];
    sum[i] = s;
  }
  spin_barrier();
  memcpy(data, sum, (size_t)count * sizeof(float));
  free(sum);
  comm_ms[r] += now_ms() - t0;
  comm_calls[r]++;
  return 0;
}

static int32_t all_gather(void *c, const void *in, void *out, int64_t bytes) {
  int r = ((ctx_t *)c)->rank;
  double t0 = now_ms();
  slot[r] = in;
  spin_barrier();
  for (int k = 0; k < WORLD; ++k)
    memcpy((char *)out + k * bytes, slot[k], (size_t)bytes);
  spin_barrier();
  comm_ms[r] += now_ms() - t0;
  comm_calls[r]++;
  return 0;
}

static int64_t seq, rounds;
static int64_t *tokens;
static pthread_barrier_t round_start, round_end; /* main + the two ranks */

typedef struct {
  void *state;
  int32_t (*step)(void *, const int64_t *, float *, int64_t);
  void (*reset)(void *);
  float *logits;
} rank_t;
static rank_t ranks[WORLD];

static void *rank_main(void *arg) {
  int r = (int)(intptr_t)arg;
  for (int64_t i = 0; i < rounds; ++i) {
    pthread_barrier_wait(&round_start);
    ranks[r].reset(ranks[r].state);
    if (ranks[r].step(ranks[r].state, tokens, ranks[r].logits, seq) != 0) {
      fprintf(stderr, "rank %d failed\n", r);
      exit(1);
    }
    pthread_barrier_wait(&round_end);
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  seq = argc > 1 ? atoll(argv[1]) : 64;
  rounds = argc > 2 ? atoll(argv[2]) : 50;
  int warmup = 3;
  tokens = malloc(seq * sizeof *tokens);
  for (int64_t i = 0; i < seq; ++i)
    tokens[i] = (i * 37 + 11) % VOCAB;
  float *whole_logits = malloc(seq * VOCAB * sizeof(float));
  llama_state *whole = llama_state_create(seq);
  llama_set_num_threads(2);
  ctx_t ctx[WORLD] = {{0}, {1}};
  maxc_comm comm[WORLD] = {{0, WORLD, &ctx[0], all_reduce, all_gather}, {1, WORLD, &ctx[1], all_reduce, all_gather}};
  llama_rank0_set_communicator(&comm[0]);
  llama_rank1_set_communicator(&comm[1]);
  ranks[0] = (rank_t){llama_rank0_state_create(seq), (int32_t(*)(void *, const int64_t *, float *, int64_t))llama_rank0_step,
                      (void (*)(void *))llama_rank0_state_reset, malloc(seq * VOCAB * sizeof(float))};
  ranks[1] = (rank_t){llama_rank1_state_create(seq), (int32_t(*)(void *, const int64_t *, float *, int64_t))llama_rank1_step,
                      (void (*)(void *))llama_rank1_state_reset, malloc(seq * VOCAB * sizeof(float))};
  rounds += warmup;
  pthread_barrier_init(&round_start, NULL, WORLD + 1);
  pthread_barrier_init(&round_end, NULL, WORLD + 1);
  pthread_t threads[WORLD];
  for (int r = 0; r < WORLD; ++r)
    pthread_create(&threads[r], NULL, rank_main, (void *)(intptr_t)r);
  double *t_whole = malloc(rounds * sizeof(double)), *t_split = malloc(rounds * sizeof(double));
  double comm_total = 0;
  for (int64_t i = 0; i < rounds; ++i) {
    double t0 = now_ms();
    llama_state_reset(whole);
    if (llama_step(whole, tokens, whole_logits, seq) != 0)
      return 1;
    t_whole[i] = now_ms() - t0;
    if (i == warmup)
      comm_ms[0] = comm_ms[1] = 0, comm_calls[0] = 0;
    t0 = now_ms();
    pthread_barrier_wait(&round_start);
    pthread_barrier_wait(&round_end);
    t_split[i] = now_ms() - t0;
  }
  for (int r = 0; r < WORLD; ++r)
    pthread_join(threads[r], NULL);
  comm_total = comm_ms[0];
  int measured = (int)(rounds - warmup);
  qsort(t_whole + warmup, measured, sizeof(double), cmp);
  qsort(t_split + warmup, measured, sizeof(double), cmp);
  double mw = t_whole[warmup + measured / 2], ms = t_split[warmup + measured / 2];
  float d = 0;
  for (int64_t i = 0; i < seq * VOCAB; ++i) {
    float e = whole_logits[i] - ranks[0].logits[i];
    d = e < 0 ? (-e > d ? -e : d) : (e > d ? e : d);
  }
  printf("{\"seq\": %lld, \"rounds\": %d, \"whole_2threads_ms\": %.4f, \"ranks_2x1_ms\": %.4f, "
         "\"ratio_split_over_whole\": %.4f, \"comm_ms_per_run_rank0\": %.4f, \"collectives_per_run\": %d, "
         "\"max_abs_diff\": %g}\n",
         (long long)seq, measured, mw, ms, ms / mw, comm_total / measured, comm_calls[0] / measured, d);
  return 0;
}
