// Wall-clock time per named compile step, in the order the steps ran: what
// `maxc compile --time-passes` prints and --manifest-timings records.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

class PassTimer {
public:
  /// Runs `step` and records its time under `name`; returns what it returns.
  template <typename F> auto run(const std::string &name, F &&step) -> decltype(step()) {
    auto start = std::chrono::steady_clock::now();
    struct Record {
      PassTimer &timer;
      const std::string &name;
      std::chrono::steady_clock::time_point start;
      ~Record() {
        timer.record(name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    } record{*this, name, start};
    return step();
  }

  void record(const std::string &name, double ms) { passes_.emplace_back(name, ms); }
  const std::vector<std::pair<std::string, double>> &passes() const { return passes_; }

private:
  std::vector<std::pair<std::string, double>> passes_;
};

} // namespace maxc
