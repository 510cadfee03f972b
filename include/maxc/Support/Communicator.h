// How the ranks of a tensor-parallel program talk: the communicator
// interface the collectives (`all_reduce`, `all_gather`; lib/Ops/
// Structural.cpp) call, and its in-process implementation, N ranks on N
// threads of one process (the emulator of N devices: every sharded model is
// tested on any machine with it). MPI and NCCL/RCCL implement the same
// interface (docs/tensor-parallel.md).
//
// Every collective is called by every rank in the same order (the ranks run
// one program). The thread group checks that: each collective carries its
// sequence number, kind and size, and a rank that reaches a different one
// than the others gets E0303 naming both, as does every rank waiting on a
// rank that failed (run_ranks aborts the group) or that has not arrived
// within the timeout. Nothing ever waits forever.
//
// Sums are taken in rank order on every rank, so every rank gets the same
// bits, whatever the thread timing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace maxc {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  /// Replaces `data[0..count)` on every rank by its sum over the ranks
  /// (added in rank order).
  virtual void all_reduce_sum(float *data, size_t count) = 0;
  virtual void all_reduce_sum(double *data, size_t count) = 0;
  /// Writes every rank's `bytes` bytes of `in` to `out` (world × bytes,
  /// rank 0's first).
  virtual void all_gather(const void *in, void *out, size_t bytes) = 0;
};

/// The C view of a communicator that compiled rank programs call (the
/// `maxc_comm` of a rank artifact's header; RuntimePool.c reads the same
/// layout): function pointers into `comm`. A failing collective returns 1
/// and keeps its error for take_collective_error.
struct CCommunicator {
  int32_t rank = 0, world = 1;
  void *ctx = nullptr;
  int32_t (*all_reduce_sum_f32)(void *ctx, float *data, int64_t count) = nullptr;
  int32_t (*all_gather)(void *ctx, const void *in, void *out, int64_t bytes) = nullptr;
};
CCommunicator c_communicator(Communicator &comm);
/// The message of the calling thread's last collective that failed through
/// a CCommunicator ("" when none), cleared.
std::string take_collective_error();

/// The communicator of the calling thread's rank (ScopedCommunicator), or
/// null outside a tensor-parallel run.
Communicator *current_communicator();

/// Makes `comm` the calling thread's communicator for its lifetime.
class ScopedCommunicator {
public:
  explicit ScopedCommunicator(Communicator *comm);
  ~ScopedCommunicator();
  ScopedCommunicator(const ScopedCommunicator &) = delete;
  ScopedCommunicator &operator=(const ScopedCommunicator &) = delete;

private:
  Communicator *previous_;
};

/// How long a rank waits for the others in one collective: the
/// MAXC_COLLECTIVE_TIMEOUT_MS environment variable, else 60 s.
std::chrono::milliseconds collective_timeout();

/// `world` ranks of one process, one thread each, sharing memory: a
/// collective publishes each rank's buffer and meets at a barrier (a
/// generation counter, as the signal buffers of a multi-GPU all-reduce do).
class ThreadGroup {
public:
  explicit ThreadGroup(int world, std::chrono::milliseconds timeout = collective_timeout());
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup &) = delete;
  ThreadGroup &operator=(const ThreadGroup &) = delete;

  int world() const;
  /// Rank r's communicator (owned by the group).
  Communicator &rank(int r);
  /// Wakes every waiting rank with E0303 "<why>"; every later collective
  /// fails the same way.
  void abort(const std::string &why);

  struct Shared;

private:
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

/// Runs fn(rank) for every rank of a `world`-rank ThreadGroup, each on its
/// own thread with its communicator current. When a rank throws, the group
/// is aborted (the others get E0303 instead of waiting) and the first
/// rank's own error (not an abort it caused elsewhere) is rethrown after
/// every thread has ended.
void run_ranks(int world, const std::function<void(int rank)> &fn,
               std::chrono::milliseconds timeout = collective_timeout());

} // namespace maxc
