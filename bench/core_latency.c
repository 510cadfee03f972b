// Core-to-core latency of this machine: two threads pinned to CPUs A and B
// (default 0 and 1) pass a cache line back and forth. A VM's vCPUs can land
// on one core complex one day and on two the next; maxc's multi-phase
// kernels (a Winograd transform written on one core, read on the other)
// feel it more than ONNX Runtime does. Record it beside 2-thread figures.
//
//   cc -O2 -pthread bench/core_latency.c -o /tmp/core_latency && /tmp/core_latency [A B]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRounds = 2000000 };
static _Atomic int flag __attribute__((aligned(64)));

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    fprintf(stderr, "core_latency: cannot pin a thread to CPU %d\n", cpu);
    exit(2);
  }
}

static void *answer(void *cpu) {
  pin(*(int *)cpu);
  for (int i = 0; i < kRounds; ++i) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 1)
      ;
    atomic_store_explicit(&flag, 0, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
  pin(a);
  pthread_t t;
  if (pthread_create(&t, NULL, answer, &b) != 0)
    return 2;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < kRounds; ++i) {
    atomic_store_explicit(&flag, 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 0)
      ;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_join(t, NULL);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / kRounds;
  printf("CPU %d <-> CPU %d: round trip %.0f ns, one way %.0f ns\n", a, b, ns, ns / 2);
  return 0;
}
