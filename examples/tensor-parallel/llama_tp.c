/* examples/tensor-parallel/llama_tp.c: the Llama example split between two
 * ranks (docs/tensor-parallel.md) decoding greedily: every rank keeps its
 * own model state, its k/v heads of the KV cache, and the tokens must be
 * the unsplit model's.
 *
 *   maxc compile examples/llama/model.json -o llama.o
 *   maxc compile examples/llama/model.json --tensor-parallel 2 -o llama.o
 *   cc -O2 -pthread llama_tp.c llama.o llama_rank0.o llama_rank1.o -lm -o llama_tp && ./llama_tp 10 1,2,3,4
 *   mpicc -O2 -DMAXC_TP_MPI llama_tp.c llama.o llama_rank0.o llama_rank1.o -lm -o llama_tp_mpi
 *   mpirun -np 2 ./llama_tp_mpi 10 1,2,3,4
 * Prints the tokens; exits 0 when they equal the unsplit model's and the
 * last logits agree within 1e-4. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */
#include "llama.h"
#include "llama_rank0.h"
#include "llama_rank1.h"

#define TP_WORLD LLAMA_RANK0_TENSOR_PARALLEL_WORLD
#include "tp_comm.h"

#include <math.h>

enum { VOCAB = LLAMA_OUTPUT_LOGITS_DIM2, MAX_TOKENS = 256 };

/* One rank's model, through the state API (types differ per rank: void *). */
typedef struct {
  void *(*create)(int64_t max_context);
  void (*destroy)(void *state);
  int32_t (*step)(void *state, const int64_t *tokens, float *logits, int64_t seq);
  void (*set_comm)(const maxc_comm *comm);
} rank_model;

#define RANK_MODEL(p)                                                                                                  \
  {(void *(*)(int64_t))p##_state_create, (void (*)(void *))p##_state_destroy,                                          \
   (int32_t(*)(void *, const int64_t *, float *, int64_t))p##_step, p##_set_communicator}
static const rank_model ranks[TP_WORLD] = {RANK_MODEL(llama_rank0), RANK_MODEL(llama_rank1)};
static const rank_model whole_model = {(void *(*)(int64_t))llama_state_create, (void (*)(void *))llama_state_destroy,
                                       (int32_t(*)(void *, const int64_t *, float *, int64_t))llama_step, NULL};

typedef struct {
  int64_t prompt[MAX_TOKENS], n_prompt, n_new;
  int64_t tokens[TP_WORLD][MAX_TOKENS];
  float *last[TP_WORLD]; /* the last step's logits row */
  int32_t status[TP_WORLD];
} job_t;

static int64_t argmax(const float *row) {
  int64_t best = 0;
  for (int64_t v = 1; v < VOCAB; ++v)
    if (row[v] > row[best])
      best = v;
  return best;
}

/* A prefill of the prompt, then a step per token; tokens[k] the k-th new one. */
static int32_t decode(const rank_model *m, const job_t *job, int64_t *tokens, float *last) {
  void *state = m->create(job->n_prompt + job->n_new);
  float *logits = (float *)malloc((size_t)job->n_prompt * VOCAB * sizeof(float));
  int32_t status = state && logits ? 0 : -1;
  const int64_t *in = job->prompt;
  int64_t seq = job->n_prompt;
  for (int64_t k = 0; status == 0 && k < job->n_new; ++k) {
    status = m->step(state, in, logits, seq);
    memcpy(last, logits + (seq - 1) * VOCAB, VOCAB * sizeof(float));
    tokens[k] = argmax(last);
    in = &tokens[k];
    seq = 1;
  }
  free(logits);
  if (state)
    m->destroy(state);
  return status;
}

static void rank_main(int rank, const maxc_comm *comm, void *arg) {
  job_t *job = (job_t *)arg;
  ranks[rank].set_comm(comm);
  job->status[rank] = decode(&ranks[rank], job, job->tokens[rank], job->last[rank]);
}

int main(int argc, char **argv) {
  job_t job = {0};
  job.n_new = argc > 2 ? atoll(argv[1]) : 0;
  for (const char *p = argc > 2 ? argv[2] : ""; *p && job.n_prompt < MAX_TOKENS / 2; ++job.n_prompt) {
    char *end;
    job.prompt[job.n_prompt] = strtoll(p, &end, 10);
    if (end == p || job.prompt[job.n_prompt] < 0 || job.prompt[job.n_prompt] >= VOCAB)
      break;
    p = *end == ',' ? end + 1 : end;
  }
  if (job.n_new < 1 || job.n_new > MAX_TOKENS / 2 || job.n_prompt < 1) {
    fprintf(stderr, "usage: %s N PROMPT   (1 <= N <= %d new tokens; PROMPT: ids like 1,2,3)\n", argv[0], MAX_TOKENS / 2);
    return 2;
  }
  for (int r = 0; r < TP_WORLD; ++r)
    job.last[r] = (float *)calloc(VOCAB, sizeof(float));
  int rank = tp_run(&argc, &argv, rank_main, &job);
  int ok = rank >= 0 && job.status[rank] == 0;
  if (rank >= 0 && job.status[rank] != 0)
    fprintf(stderr, "rank %d: %s\n", rank, llama_rank0_status_string(job.status[rank]));
  if (ok && rank == 0) {
    int64_t want[MAX_TOKENS];
    float *last = (float *)malloc(VOCAB * sizeof(float)), d = 0;
    ok = decode(&whole_model, &job, want, last) == 0;
    for (int64_t v = 0; v < VOCAB; ++v)
      d = fmaxf(d, fabsf(last[v] - job.last[0][v]));
    for (int64_t k = 0; k < job.n_new; ++k) {
      printf("%lld%s", (long long)job.tokens[0][k], k + 1 < job.n_new ? " " : "\n");
      ok = ok && job.tokens[0][k] == want[k];
    }
    ok = ok && d <= 1e-4f;
    fprintf(stderr, "%d ranks: tokens %s the unsplit model's; last logits max |split - whole| = %g\n", TP_WORLD,
            ok ? "equal" : "DIFFER FROM", d);
    free(last);
  }
  tp_finish();
  return ok ? 0 : 1;
}
