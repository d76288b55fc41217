// The dropout stream of the row kernels that fuse dropout into a softmax (attention.cu,
// rel_attention.cu): the Philox contract of kernels/dropout.h on
// a contiguous probability tensor, walked in chunks of whole Philox blocks.
//
// Stream word w is lane w % 4 of Philox block w / 4: a warp computes each block once and hands
// its four words to the four lanes whose elements they are (for_owned_elements), one 10-round
// block per 4 elements instead of per element, with coalesced accesses. The keep test u >= p is
// the exact integer form (word >> 8) >= ceil(p * 2^24), as in dropout.cu. A pass that must see the elements a thread
// handled in an earlier pass walks the row in the same order, so every thread only ever
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

// Calls use(j, word, load(j)) for the elements j in [0, n) of a run whose element 0 is stream word
// `run_word`, that thread `first` of `step` owns. `step` is a whole number of warps whose lanes
// are consecutive threads (a row kernel's warp or block). Each warp takes chunks of 32 Philox
// blocks (128 words) of the run in turn: lane l computes block l of the chunk, and the chunk's
// words are handed out so that lane l gets words l, l + 32, l + 64 and l + 96 (four shuffles
// each): consecutive lanes touch consecutive elements, so every load and store is coalesced,
// at one 10-round block per 4 elements. Owning whole blocks instead would put a warp's accesses
// 16 bytes apart, a quarter of each sector used. A lane's (up to) four elements of a chunk are
// loaded before any is used, so four loads are in flight rather than one (as map_row.cuh does for
// plain rows); for 8-byte C (float64 rows) one at a time, as four in flight spill registers
// on sm_90. With kWords false the Philox rounds and shuffles are skipped (word is 0): the same
// elements, for a pass that only reads back what an earlier pass of this thread wrote. All lanes
// of a warp must call it together (the shuffles).
template <bool kWords, typename C, typename Load, typename Use>
__device__ __forceinline__ void for_owned_elements(const DropoutStream& ds, std::uint64_t run_word, std::int64_t n,
                                                   int first, int step, const Load& load, const Use& use) {
  if (n <= 0) return;
  constexpr int kChunkBlocks = 32, kChunkWords = 4 * kChunkBlocks;
  constexpr bool kAhead = sizeof(C) <= 4;
  using Loaded = decltype(load(std::int64_t{0}));
  const int lane = first % kChunkBlocks, warp = first / kChunkBlocks, warps = step / kChunkBlocks;
  const std::uint64_t first_block = run_word / 4, first_word = 4 * first_block;
  const auto chunks = static_cast<std::int64_t>(
      (run_word + static_cast<std::uint64_t>(n) - first_word + kChunkWords - 1) / kChunkWords);
  for (std::int64_t c = warp; c < chunks; c += warps) {  // warp-uniform
    const std::uint64_t chunk_block = first_block + static_cast<std::uint64_t>(c) * kChunkBlocks;
    philox::U32x4 words{{0u, 0u, 0u, 0u}};
    if constexpr (kWords) {
      const std::uint64_t block = chunk_block + static_cast<std::uint64_t>(lane);
      const philox::U32x4 counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
      words = philox::philox4x32_10(counter, ds.key_lo, ds.key_hi);
    }
    // Word 32 k + lane of the chunk is word lane % 4 of the chunk's block 8 k + lane / 4.
    const auto word_of = [&](int k) {
      std::uint32_t mine = 0;
      if constexpr (kWords) {
        const int from = 8 * k + lane / 4;
        const std::uint32_t w0 = __shfl_sync(0xffffffffu, words.v[0], from),
                            w1 = __shfl_sync(0xffffffffu, words.v[1], from),
                            w2 = __shfl_sync(0xffffffffu, words.v[2], from),
                            w3 = __shfl_sync(0xffffffffu, words.v[3], from);
        const int which = lane % 4;
        mine = which == 0 ? w0 : which == 1 ? w1 : which == 2 ? w2 : w3;
      }
      return mine;
    };
    // Element k of this lane in the chunk, or -1 outside the run.
    const auto element = [&](int k) -> std::int64_t {
      const std::uint64_t word = 4 * chunk_block + static_cast<std::uint64_t>(32 * k + lane);
      return word < run_word || word - run_word >= static_cast<std::uint64_t>(n)
                 ? -1
                 : static_cast<std::int64_t>(word - run_word);
    };
    if constexpr (kAhead) {
      Loaded v[4]{};  // the elements outside the run stay unused
      EMU_UNROLL
      for (int k = 0; k < 4; ++k) {
        if (const std::int64_t j = element(k); j >= 0) v[k] = load(j);
      }
      // The uses one at a time (not unrolled: four copies of the use and its exponential cost the
      // row kernels a quarter of their occupancy on sm_90), the loaded values shifted down a slot
      // each round so that they stay in registers.
#pragma unroll 1
      for (int k = 0; k < 4; ++k) {
        const std::uint32_t mine = word_of(k);  // every lane shuffles, in the run or not
        if (const std::int64_t j = element(k); j >= 0) use(j, mine, v[0]);
        v[0] = v[1];
        v[1] = v[2];
        v[2] = v[3];
      }
    } else {
#pragma unroll 1
      for (int k = 0; k < 4; ++k) {
        const std::uint32_t mine = word_of(k);
        if (const std::int64_t j = element(k); j >= 0) use(j, mine, load(j));
      }
    }
  }
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
