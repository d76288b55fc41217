// Timing and option parsing shared by the benchmarks in bench/ and bench/kernels/.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/device.h"

namespace define::bench {

// Best wall time in seconds of `runs` calls after one untimed warm-up call. Work queued on a
// device is synchronised before the clock stops, so GPU kernels are timed to completion.
inline double best_seconds(const std::function<void()>& f, Device device = Device::cpu(), int runs = 5) {
  const auto sync = [&] {
    if (!device.is_cpu()) device_interface(device.type).synchronize(device.index);
  };
  f();
  sync();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    sync();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The integer value of a command-line option, or an error naming the option and what it got:
// std::stoll alone accepts "12abc" as 12 and reports a bad value only as "stoll".
inline std::int64_t option_int(const std::string& option, const std::string& value) {
  std::size_t used = 0;
  std::int64_t n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {  // not a number, or out of range: `used` stays 0
  }
  if (used == 0 || used != value.size())
    throw std::runtime_error("option " + option + " wants an integer, got '" + value + "'");
  return n;
}

}  // namespace define::bench
