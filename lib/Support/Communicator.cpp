#include "maxc/Support/Communicator.h"

#include "maxc/Support/Error.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace maxc {

namespace {
thread_local Communicator *t_current = nullptr;
} // namespace

Communicator *current_communicator() { return t_current; }

namespace {
thread_local std::string t_collective_error;

template <typename F> int32_t guarded(F &&f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    t_collective_error = e.what();
    return 1;
  }
}
} // namespace

CCommunicator c_communicator(Communicator &comm) {
  CCommunicator c;
  c.rank = comm.rank();
  c.world = comm.world();
  c.ctx = &comm;
  c.all_reduce_sum_f32 = [](void *ctx, float *data, int64_t count) -> int32_t {
    return guarded([&] { static_cast<Communicator *>(ctx)->all_reduce_sum(data, static_cast<size_t>(count)); });
  };
  c.all_gather = [](void *ctx, const void *in, void *out, int64_t bytes) -> int32_t {
    return guarded([&] { static_cast<Communicator *>(ctx)->all_gather(in, out, static_cast<size_t>(bytes)); });
  };
  return c;
}

std::string take_collective_error() {
  std::string e = std::move(t_collective_error);
  t_collective_error.clear();
  return e;
}

ScopedCommunicator::ScopedCommunicator(Communicator *comm) : previous_(t_current) { t_current = comm; }
ScopedCommunicator::~ScopedCommunicator() { t_current = previous_; }

std::chrono::milliseconds collective_timeout() {
  if (const char *env = std::getenv("MAXC_COLLECTIVE_TIMEOUT_MS")) {
    char *end = nullptr;
    long long ms = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && ms > 0)
      return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(60000);
}

/// What one rank brings to a collective: checked equal on every rank.
struct Step {
  uint64_t seq = 0;
  const char *kind = "";
  size_t bytes = 0;
  const void *buffer = nullptr;
  std::string text(int rank) const {
    return "rank " + std::to_string(rank) + " is at " + kind + " #" + std::to_string(seq) + " of " +
           std::to_string(bytes) + " bytes";
  }
};

struct ThreadGroup::Shared {
  int world;
  std::chrono::milliseconds timeout;
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t generation = 0; // barriers passed
  int arrived = 0;
  bool aborted = false;
  std::string why;
  std::vector<Step> steps;

  /// Waits until every rank has arrived at this barrier (or the group is
  /// aborted, or the timeout passes: then aborts it). `lock` holds mutex.
  void barrier(std::unique_lock<std::mutex> &lock, int rank, const Step &step) {
    if (aborted)
      throw Error(ErrorCode::Collective, why);
    uint64_t gen = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, timeout, [&] { return generation != gen || aborted; })) {
      aborted = true;
      why = step.text(rank) + " and waited " + std::to_string(timeout.count()) +
            " ms for the other ranks (MAXC_COLLECTIVE_TIMEOUT_MS)";
      cv.notify_all();
    }
    if (aborted)
      throw Error(ErrorCode::Collective, why);
  }
};

class ThreadRank final : public Communicator {
public:
  ThreadRank(ThreadGroup::Shared &shared, int rank) : s_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return s_.world; }

  void all_reduce_sum(float *data, size_t count) override { reduce(data, count, "all_reduce(f32)"); }
  void all_reduce_sum(double *data, size_t count) override { reduce(data, count, "all_reduce(f64)"); }

  void all_gather(const void *in, void *out, size_t bytes) override {
    exchange("all_gather", in, bytes, [&](const std::vector<Step> &steps) {
      for (int r = 0; r < s_.world; ++r)
        if (bytes)
          std::memcpy(static_cast<std::byte *>(out) + r * bytes, steps[r].buffer, bytes);
    });
  }

private:
  template <typename T> void reduce(T *data, size_t count, const char *kind) {
    std::vector<T> sum(count, T(0));
    exchange(kind, data, count * sizeof(T), [&](const std::vector<Step> &steps) {
      for (int r = 0; r < s_.world; ++r) {
        const T *x = static_cast<const T *>(steps[r].buffer);
        for (size_t i = 0; i < count; ++i)
          sum[i] += x[i];
      }
    });
    if (count)
      std::memcpy(data, sum.data(), count * sizeof(T));
  }

  /// Publishes `buffer`, meets the others, runs `read` over every rank's
  /// published step, and meets them again (so no rank changes its buffer
  /// while another still reads it).
  void exchange(const char *kind, const void *buffer, size_t bytes,
                const std::function<void(const std::vector<Step> &)> &read) {
    Step mine{seq_++, kind, bytes, buffer};
    std::unique_lock<std::mutex> lock(s_.mutex);
    s_.steps[rank_] = mine;
    s_.barrier(lock, rank_, mine);
    for (int r = 0; r < s_.world; ++r) {
      const Step &other = s_.steps[r];
      if (other.seq != mine.seq || std::strcmp(other.kind, mine.kind) != 0 || other.bytes != mine.bytes) {
        s_.aborted = true;
        s_.why = "the ranks reached different collectives: " + mine.text(rank_) + ", " + other.text(r);
        s_.cv.notify_all();
        throw Error(ErrorCode::Collective, s_.why);
      }
    }
    std::vector<Step> steps = s_.steps;
    lock.unlock(); // the reads run in parallel; the buffers stay until the second barrier
    read(steps);
    lock.lock();
    s_.barrier(lock, rank_, mine);
  }

  ThreadGroup::Shared &s_;
  int rank_;
  uint64_t seq_ = 0;
};

ThreadGroup::ThreadGroup(int world, std::chrono::milliseconds timeout) : shared_(std::make_unique<Shared>()) {
  if (world < 1)
    throw Error(ErrorCode::InvalidArgument, "a thread group needs at least 1 rank, got " + std::to_string(world));
  shared_->world = world;
  shared_->timeout = timeout;
  shared_->steps.resize(world);
  for (int r = 0; r < world; ++r)
    ranks_.push_back(std::make_unique<ThreadRank>(*shared_, r));
}

ThreadGroup::~ThreadGroup() = default;

int ThreadGroup::world() const { return shared_->world; }

Communicator &ThreadGroup::rank(int r) {
  if (r < 0 || r >= shared_->world)
    throw Error(ErrorCode::InvalidArgument,
                "rank " + std::to_string(r) + " is outside [0, " + std::to_string(shared_->world) + ")");
  return *ranks_[r];
}

void ThreadGroup::abort(const std::string &why) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (!shared_->aborted) {
    shared_->aborted = true;
    shared_->why = why;
  }
  shared_->cv.notify_all();
}

void run_ranks(int world, const std::function<void(int rank)> &fn, std::chrono::milliseconds timeout) {
  ThreadGroup group(world, timeout);
  std::vector<std::exception_ptr> errors(world);
  std::vector<char> own(world, 0); // the rank's own failure, not an E0303 another rank caused
  auto body = [&](int r) {
    ScopedCommunicator scope(&group.rank(r));
    try {
      fn(r);
    } catch (const Error &e) {
      errors[r] = std::current_exception();
      own[r] = e.code() != ErrorCode::Collective;
      group.abort("rank " + std::to_string(r) + " failed: " + e.what());
    } catch (const std::exception &e) {
      errors[r] = std::current_exception();
      own[r] = 1;
      group.abort("rank " + std::to_string(r) + " failed: " + e.what());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < world; ++r)
    threads.emplace_back(body, r);
  body(0);
  for (std::thread &t : threads)
    t.join();
  for (int pass = 0; pass < 2; ++pass) // the lowest rank's own error first, else the lowest rank's
    for (int r = 0; r < world; ++r)
      if (errors[r] && (own[r] || pass == 1))
        std::rethrow_exception(errors[r]);
}

} // namespace maxc
