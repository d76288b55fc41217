// Timing shared by the benchmarks in bench/ and bench/kernels/.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include "core/device.h"

namespace define::bench {

// Best wall time in seconds of `runs` calls after one untimed warm-up call. Work queued on a
// device is synchronised before the clock stops, so GPU kernels are timed to completion.
inline double best_seconds(const std::function<void()>& f, Device device = Device::cpu(), int runs = 5) {
  const auto sync = [&] {
    if (!device.is_cpu()) device_interface(device.type).synchronize();
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

}  // namespace define::bench
