// run_jobs (maxc compile --jobs): every task runs once, whatever the number
// of threads, and a failure is reported as a serial run would meet it.
#include "maxc/Codegen/CompileJobs.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using maxc::codegen::run_jobs;

TEST_CASE("run_jobs runs every task once on up to N threads", "[jobs]") {
  CHECK(maxc::codegen::default_jobs() >= 1);
  for (unsigned jobs : {0u, 1u, 2u, 3u, 16u}) {
    INFO("jobs " << jobs);
    std::vector<std::atomic<int>> runs(7);
    std::mutex m;
    std::set<std::thread::id> threads;
    run_jobs(runs.size(), jobs, [&](size_t i) {
      ++runs[i];
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
    for (const auto &r : runs)
      CHECK(r.load() == 1);
    if (jobs == 1)
      CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
    CHECK(threads.size() <= (jobs ? jobs : maxc::codegen::default_jobs()));
  }
  run_jobs(0, 4, [](size_t) { FAIL("no task to run"); });
}

TEST_CASE("run_jobs rethrows the lowest failing task's error for every N", "[jobs]") {
  for (unsigned jobs : {1u, 2u, 4u}) {
    INFO("jobs " << jobs);
    try {
      run_jobs(12, jobs, [](size_t i) {
        if (i == 3 || i == 5 || i == 9)
          throw std::runtime_error("task " + std::to_string(i));
      });
      FAIL("no error");
    } catch (const std::runtime_error &e) {
      CHECK(std::string(e.what()) == "task 3");
    }
  }
}
