// The in-process communicator (Support/Communicator.h): collectives under
// random delays neither deadlock nor mix up steps; a rank that fails, or
// reaches another collective, or never arrives, ends every rank with E0303
// instead of a hang.
#include "maxc/Support/Communicator.h"
#include "maxc/Support/Error.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using namespace maxc;

namespace {

void random_sleep(std::mt19937 &rng) {
  std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
}

} // namespace

TEST_CASE("all_reduce and all_gather under random delays: the right step's data, the same bits everywhere",
          "[support][communicator]") {
  for (int world : {2, 3, 4}) {
    const int steps = 60;
    std::vector<std::vector<float>> sums(world);
    run_ranks(world, [&](int r) {
      std::mt19937 rng(1234 + r);
      Communicator *comm = current_communicator();
      REQUIRE(comm);
      CHECK(comm->rank() == r);
      CHECK(comm->world() == world);
      for (int step = 0; step < steps; ++step) {
        random_sleep(rng);
        // Values that say which rank and step they came from.
        std::vector<float> x = {float(step * 100 + r), 0.1f * float(r + 1), 1e8f * float(r % 2 ? 1 : -1)};
        comm->all_reduce_sum(x.data(), x.size());
        float expected0 = 0;
        for (int k = 0; k < world; ++k)
          expected0 += float(step * 100 + k);
        CHECK(x[0] == expected0);
        sums[r].insert(sums[r].end(), x.begin(), x.end());
        random_sleep(rng);
        int64_t mine[2] = {step, r};
        std::vector<int64_t> all(2 * world);
        comm->all_gather(mine, all.data(), sizeof mine);
        for (int k = 0; k < world; ++k) {
          CHECK(all[2 * k] == step);
          CHECK(all[2 * k + 1] == k);
        }
      }
    });
    for (int r = 1; r < world; ++r) // summed in rank order on every rank: identical bits
      CHECK(std::memcmp(sums[r].data(), sums[0].data(), sums[0].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("ranks that reach different collectives fail with E0303 naming both", "[support][communicator]") {
  try {
    run_ranks(2, [](int r) {
      Communicator &comm = *current_communicator();
      float x[4] = {1, 2, 3, 4};
      if (r == 0)
        comm.all_reduce_sum(x, 4);
      else
        comm.all_gather(x, x, 0);
    });
    FAIL("expected E0303");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::Collective);
    std::string what = e.what();
    CHECK(what.find("different collectives") != std::string::npos);
    CHECK(what.find("all_gather") != std::string::npos);
  }
}

TEST_CASE("a rank that fails ends the others' waits; its own error is the one reported", "[support][communicator]") {
  std::atomic<int> collective_errors{0};
  auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(
        3,
        [&](int r) {
          if (r == 1)
            throw Error(ErrorCode::InputMismatch, "rank 1's input is bad");
          float x = 1;
          try {
            current_communicator()->all_reduce_sum(&x, 1);
          } catch (const Error &e) {
            if (e.code() == ErrorCode::Collective)
              ++collective_errors;
            throw;
          }
        },
        std::chrono::milliseconds(30000));
    FAIL("expected rank 1's error");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::InputMismatch);
  }
  CHECK(collective_errors == 2);
  // Woken by the abort, not by the 30 s timeout.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("a rank that never arrives times the others out with E0303", "[support][communicator]") {
  auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(
        2,
        [](int r) {
          if (r == 1) { // does its work without the collective, and returns late
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
            return;
          }
          double x = 1;
          current_communicator()->all_reduce_sum(&x, 1);
        },
        std::chrono::milliseconds(100));
    FAIL("expected E0303");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::Collective);
    CHECK(std::string(e.what()).find("waited 100 ms") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("no communicator outside a tensor-parallel run; a group needs a rank", "[support][communicator]") {
  CHECK(current_communicator() == nullptr);
  CHECK_THROWS_AS(ThreadGroup(0), Error);
  ThreadGroup one(1);
  float x = 2;
  one.rank(0).all_reduce_sum(&x, 1);
  CHECK(x == 2);
  CHECK_THROWS_AS(one.rank(1), Error);
}
