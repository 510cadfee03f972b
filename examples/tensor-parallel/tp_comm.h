/* examples/tensor-parallel/tp_comm.h: two communicators for maxc's
 * tensor-parallel rank programs (the maxc_comm of a rank's header;
 * docs/tensor-parallel.md), and tp_run, which runs every rank:
 *   - by default, TP_WORLD threads of this process sharing memory: each
 *     collective publishes the rank's buffer and meets the others at a
 *     barrier, and sums in rank order (every rank gets the same bits);
 *   - with -DMAXC_TP_MPI, one process per rank under mpirun: MPI_Allreduce
 *     and MPI_Allgather on MPI_COMM_WORLD.
 * Define TP_WORLD (the header's NAME_TENSOR_PARALLEL_WORLD) first; include
 * a rank header first too (it defines maxc_comm). */
#ifndef TP_COMM_H
#define TP_COMM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rank_main(rank, comm, arg): install comm in the rank's program and run it. */
typedef void (*tp_rank_fn)(int rank, const maxc_comm *comm, void *arg);

#ifdef MAXC_TP_MPI
#include <mpi.h>

static int32_t tp_mpi_all_reduce(void *ctx, float *data, int64_t count) {
  (void)ctx;
  return MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 1;
}

static int32_t tp_mpi_all_gather(void *ctx, const void *in, void *out, int64_t bytes) {
  (void)ctx;
  return MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 1;
}

/* This process's rank runs; returns its rank (-1: wrong process count). */
static int tp_run(int *argc, char ***argv, tp_rank_fn rank_main, void *arg) {
  int rank = 0, world = 0;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != TP_WORLD) {
    if (rank == 0)
      fprintf(stderr, "run it with mpirun -np %d (got %d processes)\n", TP_WORLD, world);
    return -1;
  }
  maxc_comm comm = {rank, TP_WORLD, NULL, tp_mpi_all_reduce, tp_mpi_all_gather};
  rank_main(rank, &comm, arg);
  return rank;
}

static void tp_finish(void) { MPI_Finalize(); }

#else
#include <pthread.h>

typedef struct {
  pthread_barrier_t barrier;
  const void *slot[TP_WORLD];
} tp_group;

typedef struct {
  tp_group *group;
  int rank;
  maxc_comm comm;
  tp_rank_fn rank_main;
  void *arg;
} tp_thread;

static int32_t tp_thread_all_reduce(void *ctx, float *data, int64_t count) {
  tp_thread *t = (tp_thread *)ctx;
  float *sum = (float *)malloc((size_t)count * sizeof(float) + 1);
  if (!sum)
    return 1; /* (the other ranks then wait: a real program aborts here) */
  t->group->slot[t->rank] = data;
  pthread_barrier_wait(&t->group->barrier);
  for (int64_t i = 0; i < count; ++i) {
    float s = 0;
    for (int r = 0; r < TP_WORLD; ++r)
      s += ((const float *)t->group->slot[r])[i];
    sum[i] = s;
  }
  pthread_barrier_wait(&t->group->barrier); /* nobody changes a buffer another still reads */
  memcpy(data, sum, (size_t)count * sizeof(float));
  free(sum);
  return 0;
}

static int32_t tp_thread_all_gather(void *ctx, const void *in, void *out, int64_t bytes) {
  tp_thread *t = (tp_thread *)ctx;
  t->group->slot[t->rank] = in;
  pthread_barrier_wait(&t->group->barrier);
  for (int r = 0; r < TP_WORLD; ++r)
    memcpy((char *)out + r * bytes, t->group->slot[r], (size_t)bytes);
  pthread_barrier_wait(&t->group->barrier);
  return 0;
}

static void *tp_thread_main(void *arg) {
  tp_thread *t = (tp_thread *)arg;
  t->rank_main(t->rank, &t->comm, t->arg);
  return NULL;
}

/* Every rank on a thread of its own; returns 0 (the caller sees all ranks). */
static int tp_run(int *argc, char ***argv, tp_rank_fn rank_main, void *arg) {
  (void)argc;
  (void)argv;
  tp_group group;
  tp_thread threads[TP_WORLD];
  pthread_t ids[TP_WORLD];
  pthread_barrier_init(&group.barrier, NULL, TP_WORLD);
  for (int r = 0; r < TP_WORLD; ++r) {
    threads[r] = (tp_thread){&group, r, {r, TP_WORLD, NULL, tp_thread_all_reduce, tp_thread_all_gather}, rank_main, arg};
    threads[r].comm.ctx = &threads[r];
    pthread_create(&ids[r], NULL, tp_thread_main, &threads[r]);
  }
  for (int r = 0; r < TP_WORLD; ++r)
    pthread_join(ids[r], NULL);
  pthread_barrier_destroy(&group.barrier);
  return 0;
}

static void tp_finish(void) {}
#endif

#endif
