#include "core/generator.h"

namespace define {

std::uint64_t Generator::reserve(std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t start = state_.offset;
  state_.offset += (n + 3) / 4 * 4;
  return start;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void Generator::set_state(GeneratorState s) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = s;
}

void Generator::manual_seed(std::uint64_t seed) { set_state({seed, 0}); }

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace define
