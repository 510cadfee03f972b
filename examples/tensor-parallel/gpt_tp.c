/* examples/tensor-parallel/gpt_tp.c: the GPT example split between two ranks
 * (docs/tensor-parallel.md), checked against the whole model.
 *
 *   maxc compile examples/gpt/model.json -o gpt.o
 *   maxc compile examples/gpt/model.json --tensor-parallel 2 -o gpt.o   # gpt_rank0.o, gpt_rank1.o
 * Two threads of one process:
 *   cc -O2 -pthread gpt_tp.c gpt.o gpt_rank0.o gpt_rank1.o -lm -o gpt_tp && ./gpt_tp
 * Two processes under MPI:
 *   mpicc -O2 -DMAXC_TP_MPI gpt_tp.c gpt.o gpt_rank0.o gpt_rank1.o -lm -o gpt_tp_mpi
 *   mpirun -np 2 ./gpt_tp_mpi
 * Every rank gets the whole logits; rank 0 compares them with the unsplit
 * model's and exits 0 when they agree within 1e-4. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */
#include "gpt.h"
#include "gpt_rank0.h"
#include "gpt_rank1.h"

#define TP_WORLD GPT_RANK0_TENSOR_PARALLEL_WORLD
#include "tp_comm.h"

#include <math.h>

enum { SEQ = GPT_INPUT_TOKENS_DIM1, VOCAB = GPT_OUTPUT_LOGITS_DIM2 };

/* Rank r runs gpt_rank<r>: a program links every rank's object. */
typedef int32_t (*run_fn)(const int64_t *tokens, float *logits, int64_t batch, void *workspace);
typedef void (*set_comm_fn)(const maxc_comm *comm);
static const run_fn rank_run[TP_WORLD] = {gpt_rank0_run, gpt_rank1_run};
static const set_comm_fn rank_set_comm[TP_WORLD] = {gpt_rank0_set_communicator, gpt_rank1_set_communicator};

typedef struct {
  int64_t tokens[SEQ];
  float *logits[TP_WORLD];
  int32_t status[TP_WORLD];
} job_t;

static void rank_main(int rank, const maxc_comm *comm, void *arg) {
  job_t *job = (job_t *)arg;
  rank_set_comm[rank](comm);
  job->status[rank] = rank_run[rank](job->tokens, job->logits[rank], 1, NULL);
}

int main(int argc, char **argv) {
  size_t n = (size_t)SEQ * VOCAB;
  job_t job;
  for (int i = 0; i < SEQ; ++i)
    job.tokens[i] = (i * 37 + 11) % VOCAB;
  for (int r = 0; r < TP_WORLD; ++r)
    job.logits[r] = (float *)calloc(n, sizeof(float));
  /* Without a communicator a rank's program refuses to run. */
  if (gpt_rank0_run(job.tokens, job.logits[0], 1, NULL) != GPT_RANK0_ERROR_COLLECTIVE) {
    fprintf(stderr, "a rank run without a communicator did not return GPT_RANK0_ERROR_COLLECTIVE\n");
    return 1;
  }
  int rank = tp_run(&argc, &argv, rank_main, &job);
  int ok = rank >= 0;
#ifdef MAXC_TP_MPI
  int ranks_here = 1; /* this process's rank only */
#else
  int ranks_here = TP_WORLD;
#endif
  for (int r = rank; ok && r < rank + ranks_here; ++r)
    if (job.status[r] != GPT_RANK0_OK) {
      fprintf(stderr, "rank %d: %s\n", r, gpt_rank0_status_string(job.status[r]));
      ok = 0;
    } else if (memcmp(job.logits[r], job.logits[rank], n * sizeof(float)) != 0) {
      fprintf(stderr, "rank %d's logits differ from rank %d's\n", r, rank);
      ok = 0;
    }
  if (ok && rank == 0) {
    float *whole = (float *)malloc(n * sizeof(float)), d = 0;
    ok = gpt_run(job.tokens, whole, 1, NULL) == GPT_OK;
    for (size_t i = 0; i < n; ++i)
      d = fmaxf(d, fabsf(whole[i] - job.logits[0][i]));
    ok = ok && d <= 1e-4f;
    printf("%d ranks: logits max |split - whole| = %g (%s)\n", TP_WORLD, d, ok ? "ok" : "MISMATCH");
    free(whole);
  }
  tp_finish();
  return ok ? 0 : 1;
}
