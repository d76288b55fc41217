// The dropout stream of the row kernels that fuse dropout into a softmax (attention.cu,
// rel_attention.cu): the Philox contract of kernels/dropout.h on
// a contiguous probability tensor, walked in whole Philox blocks.
//
// Stream word w is lane w % 4 of Philox block w / 4, so a thread takes whole Philox blocks (the
// up-to-4 elements of a row whose words one block holds) rather than single elements: one 10-round
// block per 4 elements instead of per element. The keep test u >= p is the exact integer form
// (word >> 8) >= ceil(p * 2^24), as in dropout.cu. A pass that must see the elements a thread
// handled in an earlier pass walks the row in the same block order, so every thread only ever
// reads back its own writes.
//
// Included by kernel files only, after common.cuh; everything is in an anonymous namespace inside
// the backend namespace, like the kernels of a kernel file.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/philox.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

struct DropoutStream {
  std::uint64_t offset;  // stream word of element 0 of the probability tensor
  std::uint32_t key_lo, key_hi;
  std::uint32_t threshold;  // keep iff (word >> 8) >= threshold

  __device__ bool keeps(std::uint32_t word) const { return (word >> 8) >= threshold; }
};

inline DropoutStream dropout_stream(double p, std::uint64_t seed, std::uint64_t offset) {
  return {offset, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
          static_cast<std::uint32_t>(std::ceil(p * 16777216.0))};
}

// Calls f(j, word) for the elements j in [0, n) of a run whose element 0 is stream word
// `run_word`, that thread `first` of `step` owns: whole Philox blocks t = first, first + step, ...
// of the run. With kWords false the Philox rounds are skipped (word is 0): the same elements, for
// a pass that only reads back what an earlier pass of this thread wrote.
template <bool kWords, typename F>
__device__ __forceinline__ void for_owned_elements(const DropoutStream& ds, std::uint64_t run_word, std::int64_t n,
                                                   int first, int step, F&& f) {
  if (n <= 0) return;
  const std::uint64_t first_block = run_word / 4;
  const auto blocks = static_cast<std::int64_t>((run_word + static_cast<std::uint64_t>(n) - 1) / 4 - first_block + 1);
  for (std::int64_t t = first; t < blocks; t += step) {
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(t);
    philox::U32x4 words{{0u, 0u, 0u, 0u}};
    if constexpr (kWords) {
      const philox::U32x4 counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
      words = philox::philox4x32_10(counter, ds.key_lo, ds.key_hi);
    }
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t word = 4 * block + static_cast<std::uint64_t>(lane);
      if (word < run_word || word - run_word >= static_cast<std::uint64_t>(n)) continue;  // outside the run
      f(static_cast<std::int64_t>(word - run_word), words.v[lane]);
    }
  }
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
