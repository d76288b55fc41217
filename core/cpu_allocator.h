// CPU caching allocator. Tensors come and go at a high rate during training with a handful of
// recurring sizes, so freed blocks are kept in per-size-class free lists and reused instead of
// returning to malloc. Blocks are 64-byte aligned (one cache line, and enough for AVX-512).
//
// Size classes: requests are rounded up to a multiple of 512 bytes below 1 MiB, and to a quarter
// of the next power of two above (so a new block is at most 25% larger than asked).
//
// Reuse is best fit, not exact class: a request takes the smallest cached block of its class or
// up to twice its size. With exact classes, every size a tensor took (a BPTT window of 33 steps,
// then one of 38, an evaluation batch of 10 after training batches of 20) kept its own blocks, and
// the cache held 2-3x the live tensors (PTB LSTM: 360 MiB cached next to a 164 MiB peak); letting
// smaller requests reuse larger blocks keeps it near the working set. Blocks remember their size.
// Statistics are honest: `active_bytes` counts bytes handed out (rounded sizes), `cached_bytes`
// bytes held in free lists, `peak_active_bytes` the high-water mark of active. empty_cache() frees the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace define {

struct AllocatorStats {
  std::size_t active_bytes = 0;
  std::size_t peak_active_bytes = 0;
  std::size_t cached_bytes = 0;
  std::uint64_t alloc_count = 0;  // calls to allocate()
  std::uint64_t cache_hits = 0;   // allocate() calls served from the cache
};

class CpuCachingAllocator {
 public:
  static CpuCachingAllocator& instance();

  void* allocate(std::size_t nbytes);
  void deallocate(void* ptr, std::size_t nbytes);

  AllocatorStats stats() const;
  void reset_peak();
  void empty_cache();
  // With caching off every free goes straight back to the system (useful under sanitizers,
  // which cannot see use-after-free inside a cache).
  void set_caching(bool enabled);
  bool caching() const;

  static std::size_t round_size(std::size_t nbytes);
  // A cached block serves requests whose rounded size is at least 1 / kReuseFactor of its own.
  static constexpr std::size_t kReuseFactor = 2;
  static constexpr std::size_t kAlignment = 64;

  ~CpuCachingAllocator();

 private:
  CpuCachingAllocator();
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_lists_;  // block size -> free blocks (no empty lists)
  std::unordered_map<void*, std::size_t> block_size_;      // every live or cached block -> its size
  AllocatorStats stats_;
  bool caching_ = true;
};

}  // namespace define
