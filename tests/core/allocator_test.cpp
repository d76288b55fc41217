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

TEST_CASE("cpu allocator: best fit keeps the cache near the working set when sizes vary", "[core][allocator]") {
  auto& a = CpuCachingAllocator::instance();
  const bool was = a.caching();
  a.set_caching(true);
  a.empty_cache();
  const std::size_t base = a.stats().active_bytes;

  // A smaller request reuses a cached block up to twice its size; a block more than twice as
  // large is left for a larger request.
  void* big = a.allocate(3 << 20);  // class 3 MiB
  a.deallocate(big, 3 << 20);
  void* smaller = a.allocate(2 << 20);
  CHECK(smaller == big);
  CHECK(a.stats().active_bytes == base + (3u << 20));  // the block's own size is counted
  a.deallocate(smaller, 2 << 20);
  CHECK(a.stats().cached_bytes == (3u << 20));
  void* tiny = a.allocate(1 << 20);  // 1 MiB: the 3 MiB block is too large for it
  CHECK(tiny != big);
  a.deallocate(tiny, 1 << 20);
  a.empty_cache();

  // A training loop whose three live tensors change size every step, as activations do under
  // variable-length BPTT (sizes between 20 and 50 units of 400 KiB, i.e. 8 to 20 MiB, spanning
  // five size classes): the memory held (live + cached) stays within twice the live peak. With
  // exact size classes each class kept its own blocks and the total reached 2.5 times it.
  std::uint64_t state = 7;
  auto next_len = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return 20 + static_cast<std::size_t>((state >> 33) % 31);
  };
  std::size_t held_max = 0;
  for (int step = 0; step < 200; ++step) {
    const std::size_t n = next_len() * (400u << 10);
    void* t[3] = {a.allocate(n), a.allocate(n), a.allocate(n)};
    const AllocatorStats s = a.stats();
    held_max = std::max(held_max, s.active_bytes - base + s.cached_bytes);
    for (void* p : t) a.deallocate(p, n);
  }
  const std::size_t live_peak = 3 * CpuCachingAllocator::round_size(50 * (400u << 10));
  INFO("held " << held_max << " bytes at most, live peak " << live_peak);
  CHECK(held_max <= 2 * live_peak);
  a.empty_cache();
  CHECK(a.stats().cached_bytes == 0);
  a.set_caching(was);
}
