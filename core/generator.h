// Random generator: a seed plus a running offset into the Philox stream. Each random op reserves
// a range of the stream (reserve(n)) and computes element i from (seed, offset + i), on whichever
// device it runs. Saving (seed, offset) in a checkpoint reproduces the stream exactly.
#pragma once

#include <cstdint>
#include <mutex>

namespace define {

struct GeneratorState {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0x5eed) : state_{seed, 0} {}
  // Reserves n words and returns the starting offset (rounded to a multiple of 4 so that every
  // op starts on a fresh Philox block, which keeps device kernels simple).
  std::uint64_t reserve(std::uint64_t n);
  GeneratorState state() const;
  void set_state(GeneratorState s);
  void manual_seed(std::uint64_t seed);

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
};

// Process-wide default generator (used when an op is not handed one).
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace define
