// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
// Counter-based: the output depends only on (key, counter), so element i of a random tensor is
// a pure function of (seed, offset + i) and the CPU and CUDA backends produce identical streams
// without sharing state. This header is plain C++ usable from both host and device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DEFINE_HD __host__ __device__ __forceinline__
#else
#define DEFINE_HD inline
#endif

namespace define::philox {

struct U32x4 {
  std::uint32_t v[4];
};

DEFINE_HD void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// One block of four 32-bit outputs for a 128-bit counter and a 64-bit key.
DEFINE_HD U32x4 philox4x32_10(U32x4 ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr std::uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(M0, ctr.v[0], hi0, lo0);
    mulhilo(M1, ctr.v[2], hi1, lo1);
    ctr = U32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += W0;
    k1 += W1;
  }
  return ctr;
}

// The 32-bit random word number `index` of the stream (seed, offset): word i lives in block
// (offset + i) / 4, lane (offset + i) % 4. Offsets are kept multiples of 4 by the generator.
DEFINE_HD std::uint32_t random_u32(std::uint64_t seed, std::uint64_t offset, std::uint64_t index) {
  const std::uint64_t pos = offset + index;
  const std::uint64_t block = pos >> 2;
  const U32x4 ctr{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
  const U32x4 out = philox4x32_10(ctr, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  return out.v[pos & 3];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float32).
DEFINE_HD float u32_to_unit_float(std::uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
DEFINE_HD double u32_to_unit_double(std::uint32_t x) { return static_cast<double>(x >> 8) * (1.0 / 16777216.0); }

}  // namespace define::philox
