// CPU caching allocator: size classes, reuse, honest active/peak/cached statistics, empty_cache.
#include <catch2/catch.hpp>

#include "core/cpu_allocator.h"
#include "core/factory.h"

using namespace define;

TEST_CASE("cpu allocator: size classes", "[core][allocator]") {
  CHECK(CpuCachingAllocator::round_size(1) == 512);
  CHECK(CpuCachingAllocator::round_size(512) == 512);
  CHECK(CpuCachingAllocator::round_size(513) == 1024);
  CHECK(CpuCachingAllocator::round_size(1 << 20) == (1 << 20));
  // Above 1 MiB: quarter steps of the next power of two.
  CHECK(CpuCachingAllocator::round_size((1 << 20) + 1) == (1 << 20) + (1 << 19));
  CHECK(CpuCachingAllocator::round_size(5 << 20) == (6 << 20));
  CHECK(CpuCachingAllocator::round_size(7 << 20) == (7 << 20) + (1 << 20));
}

TEST_CASE("cpu allocator: reuse and statistics", "[core][allocator]") {
  auto& a = CpuCachingAllocator::instance();
  const bool was = a.caching();
  a.set_caching(true);
  a.empty_cache();
  const AllocatorStats s0 = a.stats();
  CHECK(s0.cached_bytes == 0);

  void* p = a.allocate(1000);  // rounds to 1024
  CHECK(reinterpret_cast<std::uintptr_t>(p) % CpuCachingAllocator::kAlignment == 0);
  CHECK(a.stats().active_bytes == s0.active_bytes + 1024);
  a.reset_peak();
  void* q = a.allocate(3000);  // 3072
  CHECK(a.stats().peak_active_bytes == s0.active_bytes + 1024 + 3072);
  a.deallocate(q, 3000);
  CHECK(a.stats().active_bytes == s0.active_bytes + 1024);
  CHECK(a.stats().cached_bytes == 3072);
  CHECK(a.stats().peak_active_bytes == s0.active_bytes + 1024 + 3072);  // peak stays

  const auto hits = a.stats().cache_hits;
  void* r = a.allocate(2600);  // same class as 3000: served from the cache
  CHECK(r == q);
  CHECK(a.stats().cache_hits == hits + 1);
  CHECK(a.stats().cached_bytes == 0);
  a.deallocate(r, 2600);
  a.deallocate(p, 1000);
  CHECK(a.stats().cached_bytes == 1024 + 3072);
  a.empty_cache();
  CHECK(a.stats().cached_bytes == 0);
  CHECK(a.stats().active_bytes == s0.active_bytes);

  {  // tensors go through the allocator
    Tensor t = zeros({256});  // 1 KiB
    CHECK(a.stats().active_bytes == s0.active_bytes + 1024);
  }
  CHECK(a.stats().cached_bytes == 1024);
  a.set_caching(false);
  CHECK(a.stats().cached_bytes == 0);
  void* u = a.allocate(100);
  a.deallocate(u, 100);
  CHECK(a.stats().cached_bytes == 0);  // caching off: straight back to the system
  a.set_caching(was);
}
