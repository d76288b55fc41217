// Fast CPU dropout. philox::random_u32 computes a whole 10-round block to return one of its four
// words; here kGroupBlocks consecutive blocks are computed together, lane-wise, so the rounds
// vectorise (32x32->64-bit multiplies across lanes) and each block serves its four elements.
// The float comparison u >= p is replaced by the equivalent integer test on the 24 random bits,
//   (word >> 8) / 2^24 >= p   <=>   (word >> 8) >= ceil(p * 2^24),
// exact because p * 2^24 is exact in double. The output is bit-identical to the reference.
#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cmath>

#include "core/philox.h"
#include "kernels/dropout.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements
constexpr int kGroupBlocks = 64;  // Philox blocks computed together (16 made GCC unroll instead of vectorise)
constexpr int kGroupWords = 4 * kGroupBlocks;  // stream words (elements) per group

// The words of blocks first_block .. first_block + kGroupBlocks - 1, in stream order:
// words[4 * b + lane] is lane `lane` of block first_block + b. Same rounds as philox4x32_10.
void philox_group(std::uint64_t first_block, std::uint32_t k0, std::uint32_t k1, std::uint32_t* words) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr std::uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  std::uint32_t c0[kGroupBlocks], c1[kGroupBlocks], c2[kGroupBlocks], c3[kGroupBlocks];
  for (int b = 0; b < kGroupBlocks; ++b) {
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(b);
    c0[b] = static_cast<std::uint32_t>(block);
    c1[b] = static_cast<std::uint32_t>(block >> 32);
    c2[b] = 0;
    c3[b] = 0;
  }
  for (int r = 0; r < 10; ++r) {
    for (int b = 0; b < kGroupBlocks; ++b) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(M0) * c0[b];
      const std::uint64_t p1 = static_cast<std::uint64_t>(M1) * c2[b];
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[b] ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[b] ^ k1;
      c1[b] = static_cast<std::uint32_t>(p1);
      c3[b] = static_cast<std::uint32_t>(p0);
      c0[b] = n0;
      c2[b] = n2;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int b = 0; b < kGroupBlocks; ++b) {
    words[4 * b + 0] = c0[b];
    words[4 * b + 1] = c1[b];
    words[4 * b + 2] = c2[b];
    words[4 * b + 3] = c3[b];
  }
}

template <typename T>
void apply_typed(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const std::int64_t n = x.numel();
  const T scale = dropout_scale<T>(p);
  const std::uint32_t threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0));
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  // Element i uses stream word offset + i. Groups are aligned to the stream (not to the tensor),
  // so the first and last groups may stick out of [offset, offset + n): those words are skipped.
  // (The generator hands out offsets that are multiples of 4, but any offset works.)
  const std::uint64_t first_group = offset / kGroupWords;
  const std::uint64_t end_word = offset + static_cast<std::uint64_t>(n);
  const auto groups = static_cast<std::int64_t>((end_word + kGroupWords - 1) / kGroupWords - first_group);
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (std::int64_t g = 0; g < groups; ++g) {
    std::uint32_t words[kGroupWords];
    const std::uint64_t group_word = (first_group + static_cast<std::uint64_t>(g)) * kGroupWords;
    philox_group(group_word / 4, k0, k1, words);
    const std::uint64_t lo = std::max(group_word, offset), hi = std::min(group_word + kGroupWords, end_word);
    const std::int64_t base = static_cast<std::int64_t>(group_word) - static_cast<std::int64_t>(offset);
    if (hi - lo == kGroupWords) {  // whole group: a fixed-length select loop the compiler vectorises
      const T* xg = xp + base;
      T* yg = yp + base;
      for (int w = 0; w < kGroupWords; ++w) yg[w] = (words[w] >> 8) >= threshold ? static_cast<T>(xg[w] * scale) : T(0);
      continue;
    }
    for (std::uint64_t w = lo - group_word; w < hi - group_word; ++w) {
      const std::int64_t i = base + static_cast<std::int64_t>(w);
      yp[i] = (words[w] >> 8) >= threshold ? static_cast<T>(xp[i] * scale) : T(0);
    }
  }
}

}  // namespace

void dropout_apply(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "dropout", [&] { apply_typed<scalar_t>(x, y, p, seed, offset); });
}

}  // namespace define::kernels::cpu
