// Dropout keep flags for a run of consecutive elements of a probability tensor, for the fast CPU
// row kernels that fuse dropout into a softmax (attention.cpp, rel_attention.cpp). Element e is
// kept iff (word_e >> 8) >= ceil(p * 2^24), word_e the Philox word offset + e: that integer test equals the float test philox::u32_to_unit_float(word) >= p of
// kernels/dropout.h exactly (p * 2^24 is exact in double), so the masks are bit-identical to the
// reference and to dropout_apply.
//
// Internal linkage, as in row_math.h: each kernel file keeps its own inlined copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace define::kernels::cpu::dropout_keep {
namespace {

// Philox blocks computed together, lane-wise (at 16 GCC 12 unrolled the round loop instead of
// vectorising it; 32 vectorises and wastes little on rows of ~100 keys).
constexpr int kPhiloxBatch = 32;

// Philox 4x32-10 blocks first_block .. first_block + kPhiloxBatch - 1, computed lane-wise (the
// same rounds as philox::philox4x32_10, so they vectorise): words[4 * b + w] is word w of block b.
inline void philox_batch(std::uint64_t first_block, std::uint32_t k0, std::uint32_t k1, std::uint32_t* words) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t x0[kPhiloxBatch], x1[kPhiloxBatch], x2[kPhiloxBatch], x3[kPhiloxBatch];
  for (int b = 0; b < kPhiloxBatch; ++b) {
    const std::uint64_t counter = first_block + static_cast<std::uint64_t>(b);
    x0[b] = static_cast<std::uint32_t>(counter);
    x1[b] = static_cast<std::uint32_t>(counter >> 32);
    x2[b] = 0;
    x3[b] = 0;
  }
  for (int round = 0; round < 10; ++round) {
    for (int b = 0; b < kPhiloxBatch; ++b) {
      const std::uint64_t prod0 = static_cast<std::uint64_t>(kMul0) * x0[b];
      const std::uint64_t prod1 = static_cast<std::uint64_t>(kMul1) * x2[b];
      const std::uint32_t y0 = static_cast<std::uint32_t>(prod1 >> 32) ^ x1[b] ^ k0;
      const std::uint32_t y2 = static_cast<std::uint32_t>(prod0 >> 32) ^ x3[b] ^ k1;
      x1[b] = static_cast<std::uint32_t>(prod1);
      x3[b] = static_cast<std::uint32_t>(prod0);
      x0[b] = y0;
      x2[b] = y2;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int b = 0; b < kPhiloxBatch; ++b) {
    words[4 * b] = x0[b];
    words[4 * b + 1] = x1[b];
    words[4 * b + 2] = x2[b];
    words[4 * b + 3] = x3[b];
  }
}

// keep[j] = 1 when element first_element + j (j < n) survives dropout, else 0.
inline void keep_flags(std::uint64_t seed, std::uint64_t offset, std::int64_t first_element, std::int64_t n,
                       std::uint32_t threshold, std::uint32_t* keep) {
  if (n <= 0) return;
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  const std::uint64_t first_word = offset + static_cast<std::uint64_t>(first_element);
  const std::uint64_t end_word = first_word + static_cast<std::uint64_t>(n);
  std::uint32_t words[4 * kPhiloxBatch];
  // Batches are aligned to whole Philox blocks; words outside [first_word, end_word) are skipped.
  for (std::uint64_t block = first_word / 4; 4 * block < end_word; block += kPhiloxBatch) {
    philox_batch(block, k0, k1, words);
    const std::uint64_t lo = std::max(4 * block, first_word), hi = std::min(4 * block + 4 * kPhiloxBatch, end_word);
    for (std::uint64_t w = lo; w < hi; ++w)
      keep[w - first_word] = (words[w - 4 * block] >> 8) >= threshold ? 1 : 0;
  }
}

// The integer keep threshold of drop probability p, on the top 24 bits of a word.
inline std::uint32_t keep_threshold(double p) { return static_cast<std::uint32_t>(std::ceil(p * 16777216.0)); }

}  // namespace
}  // namespace define::kernels::cpu::dropout_keep
