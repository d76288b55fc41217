#include "core/cpu_allocator.h"

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/error.h"

namespace define {

CpuCachingAllocator& CpuCachingAllocator::instance() {
  // Leaked on purpose: tensors held in static objects may be freed after main returns.
  static CpuCachingAllocator* a = new CpuCachingAllocator();
  return *a;
}

CpuCachingAllocator::CpuCachingAllocator() {
  if (const char* env = std::getenv("DEFINE_CPU_CACHE")) caching_ = std::string_view(env) != "0";
}

CpuCachingAllocator::~CpuCachingAllocator() { empty_cache(); }

std::size_t CpuCachingAllocator::round_size(std::size_t n) {
  if (n == 0) n = 1;
  constexpr std::size_t kSmall = 1 << 20;
  if (n <= kSmall) return (n + 511) / 512 * 512;
  std::size_t p = std::bit_ceil(n);
  std::size_t quarter = p / 4;  // steps of p/4 between p/2 and p
  return (n + quarter - 1) / quarter * quarter;
}

void* CpuCachingAllocator::allocate(std::size_t nbytes) {
  const std::size_t size = round_size(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_count;
    // Best fit: the smallest cached block of at least `size`, if it is not too large.
    auto it = free_lists_.lower_bound(size);
    if (it != free_lists_.end() && it->first <= size * kReuseFactor) {
      const std::size_t block = it->first;
      void* p = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) free_lists_.erase(it);
      stats_.cached_bytes -= block;
      stats_.active_bytes += block;
      ++stats_.cache_hits;
      if (stats_.active_bytes > stats_.peak_active_bytes) stats_.peak_active_bytes = stats_.active_bytes;
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (!p) {
    empty_cache();  // give cached blocks back and try once more before reporting
    p = std::aligned_alloc(kAlignment, size);
  }
  if (!p) fail("cpu allocator", "out of memory allocating {} bytes", size);
  std::lock_guard<std::mutex> lock(mu_);
  block_size_[p] = size;
  stats_.active_bytes += size;
  if (stats_.active_bytes > stats_.peak_active_bytes) stats_.peak_active_bytes = stats_.active_bytes;
  return p;
}

void CpuCachingAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = block_size_.find(ptr);
  if (it == block_size_.end()) {
    // Called from tensor destructors, where an exception would terminate without a word.
    std::fprintf(stderr, "cpu allocator: deallocate of %p (%zu bytes): not a block of this allocator\n", ptr, nbytes);
    std::abort();
  }
  const std::size_t size = it->second;
  stats_.active_bytes -= size;
  if (caching_) {
    free_lists_[size].push_back(ptr);
    stats_.cached_bytes += size;
  } else {
    block_size_.erase(it);
    std::free(ptr);
  }
}

AllocatorStats CpuCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CpuCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_active_bytes = stats_.active_bytes;
}

void CpuCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_lists_)
    for (void* p : blocks) {
      block_size_.erase(p);
      std::free(p);
    }
  free_lists_.clear();
  stats_.cached_bytes = 0;
}

void CpuCachingAllocator::set_caching(bool enabled) {
  if (!enabled) empty_cache();
  std::lock_guard<std::mutex> lock(mu_);
  caching_ = enabled;
}

bool CpuCachingAllocator::caching() const {
  std::lock_guard<std::mutex> lock(mu_);
  return caching_;
}

}  // namespace define
