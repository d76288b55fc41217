// 64-bit FNV-1a: a small, stable hash for fingerprints and cache keys (not for security). The
// same bytes give the same value on every machine and build, so it can name things on disk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace define {

constexpr std::uint64_t kFnv1aOffset = 14695981039346656037ULL;

// Folds n bytes at data into h (start from kFnv1aOffset).
inline void fnv1a(std::uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
}

}  // namespace define
