// CachingDeviceAllocator policy, checked on the CPU: a fake raw source (host malloc) counts
// segment traffic and can be capacity-limited to provoke the out-of-memory path; its events
// complete when a test says so, which is how record_stream's waiting is checked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"

using define::cuda::CachingDeviceAllocator;
using define::cuda::DeviceAllocatorStats;
using define::cuda::EventId;
using define::cuda::RawDeviceMemory;
using define::cuda::SegmentInfo;
using define::cuda::StreamId;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

// Host memory standing in for cudaMalloc/cudaFree. Frees of unknown pointers are recorded
// (not thrown: raw_free also runs from the allocator's destructor).
struct FakeRawMemory final : RawDeviceMemory {
  // An event: the stream it was recorded on, and whether the test has let it complete.
  struct FakeEvent {
    StreamId stream = nullptr;
    bool recorded = false;
    bool done = false;
  };

  std::size_t capacity = SIZE_MAX;  // raw_malloc fails beyond this many live bytes
  std::size_t live_bytes = 0;
  int mallocs = 0, frees = 0, refused = 0, bad_frees = 0;
  std::map<void*, std::size_t> live;
  bool fail_free = false;    // raw_free throws (a sticky CUDA error)
  bool fail_record = false;  // event_record throws
  std::map<EventId, FakeEvent*> events;  // live events
  int events_created = 0, queries = 0;

  EventId event_create() override {
    auto* e = new FakeEvent;
    events[e] = e;
    ++events_created;
    return e;
  }
  void event_record(EventId e, StreamId s) override {
    if (fail_record) throw define::Error("fake: event record failed");
    events.at(e)->stream = s;
    events.at(e)->recorded = true;
  }
  bool event_query(EventId e) override {
    ++queries;
    return events.at(e)->done;
  }
  void event_destroy(EventId e) noexcept override {
    auto it = events.find(e);
    if (it == events.end()) return;
    delete it->second;
    events.erase(it);
  }
  // Lets every live event recorded on `s` complete (the stream's queued work has finished).
  void finish_stream(StreamId s) {
    for (auto& [id, e] : events)
      if (e->recorded && e->stream == s) e->done = true;
  }

  void* raw_malloc(std::size_t n) override {
    if (live_bytes + n > capacity) {
      ++refused;
      return nullptr;
    }
    void* p = std::malloc(n);
    live[p] = n;
    live_bytes += n;
    ++mallocs;
    return p;
  }
  void raw_free(void* p) override {
    if (fail_free) throw define::Error("fake: raw free failed");
    auto it = live.find(p);
    if (it == live.end()) {
      ++bad_frees;
      return;
    }
    live_bytes -= it->second;
    live.erase(it);
    std::free(p);
    ++frees;
  }
  ~FakeRawMemory() override {
    for (auto& [p, n] : live) std::free(p);
    for (auto& [id, e] : events) delete e;
  }
};

StreamId stream(std::uintptr_t id) { return reinterpret_cast<StreamId>(id); }

std::ptrdiff_t distance(const void* from, const void* to) {
  return static_cast<const char*>(to) - static_cast<const char*>(from);
}

// The stats must agree with each other and with the raw source at every step.
void check_consistent(const CachingDeviceAllocator& a, const FakeRawMemory& raw) {
  const DeviceAllocatorStats s = a.stats();
  CHECK(s.cached_bytes == s.reserved_bytes - s.active_bytes);
  CHECK(s.reserved_bytes == raw.live_bytes);
  CHECK(s.segments == raw.live.size());
  CHECK(s.raw_mallocs == static_cast<std::uint64_t>(raw.mallocs));
  CHECK(s.raw_frees == static_cast<std::uint64_t>(raw.frees));
  CHECK(s.peak_active_bytes >= s.active_bytes);
  CHECK(raw.bad_frees == 0);
  std::size_t active = 0, reserved = 0;
  for (const SegmentInfo& seg : a.snapshot()) {
    reserved += seg.size;
    for (const auto& b : seg.blocks)
      if (b.allocated) active += b.size;
  }
  CHECK(active == s.active_bytes);
  CHECK(reserved == s.reserved_bytes);
}

// Block layout of the only segment, as (size, allocated) pairs.
std::vector<std::pair<std::size_t, bool>> layout(const CachingDeviceAllocator& a, std::size_t segment = 0) {
  std::vector<std::pair<std::size_t, bool>> out;
  const auto snap = a.snapshot();
  REQUIRE(segment < snap.size());
  for (const auto& b : snap[segment].blocks) out.emplace_back(b.size, b.allocated);
  return out;
}

}  // namespace

TEST_CASE("cuda allocator: rounding and segment sizes", "[cuda-allocator]") {
  CHECK(CachingDeviceAllocator::round_size(0) == 512);
  CHECK(CachingDeviceAllocator::round_size(1) == 512);
  CHECK(CachingDeviceAllocator::round_size(512) == 512);
  CHECK(CachingDeviceAllocator::round_size(513) == 1024);
  CHECK(CachingDeviceAllocator::round_size(1000) == 1024);
  CHECK(CachingDeviceAllocator::round_size(MiB) == MiB);
  CHECK(CachingDeviceAllocator::round_size(MiB + 1) == MiB + 512);
  CHECK(CachingDeviceAllocator::round_size(100 * MiB + 3) == 100 * MiB + 512);

  CHECK(CachingDeviceAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingDeviceAllocator::segment_size(MiB) == 2 * MiB);         // largest small request
  CHECK(CachingDeviceAllocator::segment_size(MiB + 512) == 20 * MiB);  // smallest large request
  CHECK(CachingDeviceAllocator::segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingDeviceAllocator::segment_size(10 * MiB) == 10 * MiB);  // its own segment
  CHECK(CachingDeviceAllocator::segment_size(37 * MiB + 512) == 37 * MiB + 512);

  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  void* p = a.allocate(0);  // zero bytes still gives a distinct block
  void* q = a.allocate(0);
  CHECK(p != nullptr);
  CHECK(q != p);
  CHECK(a.stats().active_bytes == 1024);
  a.deallocate(p);
  a.deallocate(q);
  a.deallocate(nullptr);  // ignored
  CHECK(a.stats().active_bytes == 0);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: small requests are carved from one 2 MiB segment", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  void* p1 = a.allocate(1000);  // 1024
  CHECK(raw.mallocs == 1);
  CHECK(raw.live.begin()->second == 2 * MiB);
  void* p2 = a.allocate(3000);  // 3072
  void* p3 = a.allocate(MiB);   // 1 MiB: still small
  CHECK(raw.mallocs == 1);
  CHECK(distance(p1, p2) == 1024);
  CHECK(distance(p1, p3) == 1024 + 3072);

  DeviceAllocatorStats s = a.stats();
  CHECK(s.active_bytes == 1024 + 3072 + MiB);
  CHECK(s.peak_active_bytes == 1024 + 3072 + MiB);
  CHECK(s.reserved_bytes == 2 * MiB);
  CHECK(s.cached_bytes == 2 * MiB - (1024 + 3072 + MiB));
  CHECK(s.segments == 1);
  CHECK(s.alloc_count == 3);
  CHECK(layout(a) == std::vector<std::pair<std::size_t, bool>>{
                         {1024, true}, {3072, true}, {MiB, true}, {MiB - 4096, false}});
  CHECK(a.snapshot()[0].small_pool);
  check_consistent(a, raw);

  // The remainder (1 MiB - 4 KiB) cannot hold another 1 MiB request: a second segment.
  void* p4 = a.allocate(MiB);
  CHECK(raw.mallocs == 2);
  CHECK(a.stats().reserved_bytes == 4 * MiB);
  check_consistent(a, raw);
  for (void* p : {p1, p2, p3, p4}) a.deallocate(p);
  CHECK(a.stats().active_bytes == 0);
  CHECK(a.stats().cached_bytes == 4 * MiB);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: freed blocks are reused, best fit first", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  void* big = a.allocate(4096);
  void* keep1 = a.allocate(512);
  void* small = a.allocate(1024);
  void* keep2 = a.allocate(512);
  a.deallocate(big);
  a.deallocate(small);
  CHECK(a.stats().active_bytes == 1024);

  // 1000 bytes fits both free blocks; the 1024-byte one is the better fit even though the
  // 4096-byte one has the lower address.
  void* r = a.allocate(1000);
  CHECK(r == small);
  void* r2 = a.allocate(4000);
  CHECK(r2 == big);
  CHECK(raw.mallocs == 1);
  CHECK(a.stats().active_bytes == 4096 + 1024 + 1024);
  CHECK(a.stats().alloc_count == 6);
  check_consistent(a, raw);

  // A smaller request splits a free block when the remainder is at least 512 bytes...
  a.deallocate(r);
  void* half = a.allocate(512);
  CHECK(half == small);
  CHECK(layout(a)[2] == std::pair<std::size_t, bool>{512, true});
  CHECK(layout(a)[3] == std::pair<std::size_t, bool>{512, false});
  void* other_half = a.allocate(1);
  CHECK(distance(half, other_half) == 512);
  CHECK(raw.mallocs == 1);
  check_consistent(a, raw);
  for (void* p : {r2, keep1, keep2, half, other_half}) a.deallocate(p);
  CHECK(layout(a) == std::vector<std::pair<std::size_t, bool>>{{2 * MiB, false}});
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: large pool segments and split threshold", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  // 1-10 MiB requests share a 20 MiB segment.
  void* p = a.allocate(3 * MiB);
  CHECK(raw.mallocs == 1);
  CHECK(raw.live.begin()->second == 20 * MiB);
  CHECK_FALSE(a.snapshot()[0].small_pool);
  void* q = a.allocate(9 * MiB);
  CHECK(raw.mallocs == 1);
  CHECK(distance(p, q) == static_cast<std::ptrdiff_t>(3 * MiB));
  CHECK(layout(a) == std::vector<std::pair<std::size_t, bool>>{
                         {3 * MiB, true}, {9 * MiB, true}, {8 * MiB, false}});
  // 7.5 MiB from the 8 MiB remainder leaves 0.5 MiB: not worth a block of its own in the
  // large pool, so the whole 8 MiB is handed out and counted as active.
  void* r = a.allocate(7 * MiB + 512 * KiB);
  CHECK(layout(a).size() == 3);
  CHECK(a.stats().active_bytes == 20 * MiB);
  CHECK(a.stats().cached_bytes == 0);
  check_consistent(a, raw);

  // A small request never takes large-pool memory (and vice versa).
  a.deallocate(q);
  void* s = a.allocate(4 * KiB);
  CHECK(raw.mallocs == 2);
  CHECK(a.stats().reserved_bytes == 22 * MiB);
  // 10 MiB and above: a segment of exactly the rounded size, unless a cached block fits.
  void* big = a.allocate(12 * MiB + 1);
  CHECK(raw.mallocs == 3);
  CHECK(a.stats().reserved_bytes == 34 * MiB + 512);
  void* fits_cached = a.allocate(9 * MiB);  // the freed 9 MiB block
  CHECK(fits_cached == q);
  CHECK(raw.mallocs == 3);
  check_consistent(a, raw);
  for (void* x : {p, r, s, big, fits_cached}) a.deallocate(x);
  CHECK(a.stats().active_bytes == 0);
  CHECK(a.stats().peak_active_bytes == 32 * MiB + 4 * KiB + 512);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: neighbours coalesce in every free order", "[cuda-allocator]") {
  // Segment layout: [piece][piece][piece][tail (held)][rest (free)]. Freeing the three pieces in
  // any order must leave a single free block that serves a request only the merged block fits.
  struct PoolCase {
    const char* name;
    std::size_t piece;
    std::size_t tail;
    std::size_t rest;  // free remainder after the tail, smaller than 3 pieces
    std::size_t segment;
  };
  const std::array<PoolCase, 2> cases{{
      {"small", 320 * KiB, MiB, 64 * KiB, 2 * MiB},
      {"large", 4 * MiB, 6 * MiB, 2 * MiB, 20 * MiB},
  }};
  for (const PoolCase& pc : cases) {
    std::array<int, 3> order{0, 1, 2};
    do {
      DYNAMIC_SECTION(pc.name << " pool, free order " << order[0] << order[1] << order[2]) {
        FakeRawMemory raw;
        CachingDeviceAllocator a(raw);
        std::array<void*, 3> piece{};
        for (auto& p : piece) p = a.allocate(pc.piece);
        void* tail = a.allocate(pc.tail);
        REQUIRE(raw.mallocs == 1);
        REQUIRE(layout(a) == std::vector<std::pair<std::size_t, bool>>{
                                 {pc.piece, true}, {pc.piece, true}, {pc.piece, true}, {pc.tail, true}, {pc.rest, false}});
        std::array<bool, 3> freed{};
        for (int step = 0; step < 3; ++step) {
          a.deallocate(piece[order[step]]);
          freed[order[step]] = true;
          // One block per run of freed neighbours, one per piece still held, tail and rest.
          std::size_t expected = 2;
          for (int i = 0; i < 3; ++i) expected += (!freed[i] || i == 0 || !freed[i - 1]) ? 1 : 0;
          CHECK(layout(a).size() == expected);
          check_consistent(a, raw);
        }
        CHECK(layout(a) == std::vector<std::pair<std::size_t, bool>>{
                               {3 * pc.piece, false}, {pc.tail, true}, {pc.rest, false}});
        CHECK(a.stats().active_bytes == pc.tail);
        CHECK(a.stats().cached_bytes == 3 * pc.piece + pc.rest);
        void* merged = a.allocate(3 * pc.piece);  // fits only the merged block
        CHECK(merged == piece[0]);
        CHECK(raw.mallocs == 1);
        a.deallocate(merged);
        a.deallocate(tail);  // joins both sides: the segment is one free block again
        CHECK(layout(a) == std::vector<std::pair<std::size_t, bool>>{{pc.segment, false}});
        check_consistent(a, raw);
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST_CASE("cuda allocator: blocks stay with their stream", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  const StreamId s1 = stream(0x10), s2 = stream(0x20);
  void* p = a.allocate(4096, s1);
  a.deallocate(p);
  // Stream 2 may still be racing ahead of stream 1's last use of p: it gets its own segment.
  void* q = a.allocate(4096, s2);
  CHECK(q != p);
  CHECK(raw.mallocs == 2);
  // Stream 1 gets its block back; the default stream gets neither.
  void* p_again = a.allocate(4096, s1);
  CHECK(p_again == p);
  void* d = a.allocate(4096);
  CHECK(d != p);
  CHECK(d != q);
  CHECK(raw.mallocs == 3);
  std::map<StreamId, int> per_stream;
  for (const SegmentInfo& seg : a.snapshot()) ++per_stream[seg.stream];
  CHECK(per_stream == std::map<StreamId, int>{{nullptr, 1}, {s1, 1}, {s2, 1}});

  // Large pool too.
  void* l1 = a.allocate(5 * MiB, s1);
  a.deallocate(l1);
  void* l2 = a.allocate(5 * MiB, s2);
  CHECK(l2 != l1);
  CHECK(raw.mallocs == 5);
  check_consistent(a, raw);
  for (void* x : {q, p_again, d, l2}) a.deallocate(x);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: out of memory releases the cache and retries", "[cuda-allocator]") {
  FakeRawMemory raw;
  raw.capacity = 22 * MiB;
  CachingDeviceAllocator a(raw);
  const StreamId s1 = stream(1), s2 = stream(2);
  a.deallocate(a.allocate(KiB, s1));      // 2 MiB small segment, cached
  a.deallocate(a.allocate(4 * MiB, s2));  // 20 MiB large segment, cached: capacity reached
  CHECK(a.stats().reserved_bytes == 22 * MiB);
  CHECK(a.stats().cached_bytes == 22 * MiB);
  void* held = a.allocate(MiB, s1);  // served by the cached small segment, no raw call
  CHECK(raw.refused == 0);

  // 12 MiB on stream 1: no cached block of stream 1 fits, the raw source is full. The cached
  // 20 MiB segment is released (the small one is in use and stays) and the retry succeeds.
  void* p = a.allocate(12 * MiB, s1);
  CHECK(raw.refused == 1);
  DeviceAllocatorStats s = a.stats();
  CHECK(s.oom_retries == 1);
  CHECK(s.raw_frees == 1);
  CHECK(s.reserved_bytes == 14 * MiB);
  CHECK(s.active_bytes == 13 * MiB);
  CHECK(s.cached_bytes == MiB);
  CHECK(s.segments == 2);
  check_consistent(a, raw);

  // A request that can never fit: released what it could, then a named error, and the
  // allocator is unchanged and still usable.
  REQUIRE_THROWS_AS(a.allocate(30 * MiB, s1), define::Error);
  REQUIRE_THROWS_WITH(a.allocate(30 * MiB, s1),
                      "device: out of memory allocating 31457280 bytes (30.0 MiB); 13631488 bytes (13.0 MiB) allocated, "
                      "1048576 bytes (1.0 MiB) cached after releasing the free cache and retrying (a smaller batch or "
                      "sequence length needs less)");
  CHECK(a.stats().active_bytes == 13 * MiB);
  CHECK(a.stats().alloc_count == 4);
  check_consistent(a, raw);
  a.deallocate(p);
  void* again = a.allocate(12 * MiB, s1);
  CHECK(again == p);
  a.deallocate(again);
  a.deallocate(held);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: peak, reset_peak and empty_cache", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  void* s1 = a.allocate(100 * KiB);  // small segment A
  void* l1 = a.allocate(2 * MiB);    // large segment B (20 MiB)
  void* h1 = a.allocate(24 * MiB);   // huge segment C (B's 18 MiB free tail is too small)
  CHECK(a.stats().peak_active_bytes == 100 * KiB + 26 * MiB);
  a.deallocate(h1);
  a.deallocate(s1);
  CHECK(a.stats().active_bytes == 2 * MiB);
  CHECK(a.stats().peak_active_bytes == 100 * KiB + 26 * MiB);  // the peak stays
  a.reset_peak();
  CHECK(a.stats().peak_active_bytes == 2 * MiB);
  void* s2 = a.allocate(KiB);
  CHECK(a.stats().peak_active_bytes == 2 * MiB + KiB);
  a.deallocate(s2);
  CHECK(a.stats().reserved_bytes == 46 * MiB);

  // A and C are fully free and go back; B holds l1 and stays whole (its free tail too).
  a.empty_cache();
  DeviceAllocatorStats s = a.stats();
  CHECK(s.reserved_bytes == 20 * MiB);
  CHECK(s.segments == 1);
  CHECK(s.raw_frees == 2);
  CHECK(s.active_bytes == 2 * MiB);
  CHECK(s.cached_bytes == 18 * MiB);
  check_consistent(a, raw);

  a.deallocate(l1);
  a.empty_cache();
  s = a.stats();
  CHECK(s.reserved_bytes == 0);
  CHECK(s.cached_bytes == 0);
  CHECK(s.segments == 0);
  CHECK(raw.live.empty());
  check_consistent(a, raw);
  // Works from scratch afterwards.
  void* p = a.allocate(KiB);
  CHECK(raw.mallocs == 4);
  a.deallocate(p);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: bad frees are named errors, destructor returns everything", "[cuda-allocator]") {
  FakeRawMemory raw;
  {
    CachingDeviceAllocator a(raw);
    void* p = a.allocate(KiB);
    int not_ours = 0;
    REQUIRE_THROWS_WITH(a.deallocate(&not_ours), Catch::Contains("cuda allocator: free of pointer"));
    a.deallocate(p);
    REQUIRE_THROWS_WITH(a.deallocate(p), Catch::Contains("not an allocated block"));
    void* inner = static_cast<char*>(a.allocate(4 * KiB)) + 512;  // interior pointers are not blocks
    REQUIRE_THROWS_AS(a.deallocate(inner), define::Error);
    a.allocate(5 * MiB);  // still active when the allocator goes away
    CHECK(raw.live.size() == 2);
    check_consistent(a, raw);
  }
  CHECK(raw.live.empty());
  CHECK(raw.bad_frees == 0);
}

TEST_CASE("cuda allocator: concurrent use from several threads", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  std::atomic<int> corrupted{0};  // Catch2 assertions are not thread-safe: count, check after
  auto worker = [&a, &corrupted](std::uintptr_t id) {
    std::mt19937 rng(static_cast<unsigned>(id));
    std::uniform_int_distribution<std::size_t> size(1, 64 * KiB);
    std::vector<std::pair<unsigned char*, std::size_t>> held;
    for (int i = 0; i < 2000; ++i) {
      if (held.size() < 16 && (held.empty() || rng() % 2)) {
        const std::size_t n = size(rng);
        auto* p = static_cast<unsigned char*>(a.allocate(n, stream(id)));
        std::memset(p, static_cast<int>(id), n);  // blocks must not overlap: checked on free
        held.emplace_back(p, n);
      } else {
        const std::size_t k = rng() % held.size();
        auto [p, n] = held[k];
        for (std::size_t j = 0; j < n; j += 97)
          if (p[j] != static_cast<unsigned char>(id)) ++corrupted;
        a.deallocate(p);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (auto& [p, n] : held) a.deallocate(p);
  };
  std::thread t1(worker, 1), t2(worker, 2);
  worker(3);
  t1.join();
  t2.join();
  CHECK(corrupted == 0);
  CHECK(a.stats().active_bytes == 0);
  CHECK(a.stats().alloc_count > 0);
  check_consistent(a, raw);
  a.empty_cache();
  CHECK(a.stats().reserved_bytes == 0);
  CHECK(raw.live.empty());
}

TEST_CASE("cuda allocator: oversize blocks are never split and serve only near sizes", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  void* big = a.allocate(30 * MiB);  // an oversize segment of its own
  a.deallocate(big);
  // A 2 MiB request does not carve the cached 30 MiB block: it gets a 20 MiB segment.
  void* small = a.allocate(2 * MiB);
  CHECK(small != big);
  CHECK(raw.mallocs == 2);
  // 19 MiB (an oversize request: the 20 MiB segment's free 18 MiB are too few) would leave 11 MiB
  // of the 30 MiB block unused (<= 20 MiB): served by it whole, not split.
  void* near = a.allocate(19 * MiB);
  CHECK(near == big);
  CHECK(a.stats().active_bytes == 2 * MiB + 30 * MiB);
  for (const SegmentInfo& seg : a.snapshot())
    if (seg.size == 30 * MiB) CHECK(seg.blocks.size() == 1);
  // While the 30 MiB block is in use, 19 MiB would leave 31 MiB of a cached 50 MiB block unused:
  // it gets a segment of its own instead.
  void* huge = a.allocate(50 * MiB);
  a.deallocate(huge);
  const int before = raw.mallocs;
  void* again = a.allocate(19 * MiB);
  CHECK(again != huge);
  CHECK(raw.mallocs == before + 1);
  for (void* p : {again, near, small}) a.deallocate(p);
  check_consistent(a, raw);
  a.empty_cache();
  CHECK(a.stats().reserved_bytes == 0);
}

TEST_CASE("cuda allocator: a block recorded on other streams waits for their work", "[cuda-allocator]") {
  FakeRawMemory raw;
  CachingDeviceAllocator a(raw);
  const StreamId s1 = stream(0x10), s2 = stream(0x20), s3 = stream(0x30);

  // Stream-local reuse is unchanged: no record, no event, the block comes straight back.
  void* p = a.allocate(4096, s1);
  a.record_stream(p, s1);  // its own stream: nothing to wait for
  a.deallocate(p);
  CHECK(raw.events_created == 0);
  CHECK(a.allocate(4096, s1) == p);

  // Used on s2 and s3 as well: the free records one event on each and parks the block.
  a.record_stream(p, s2);
  a.record_stream(p, s3);
  a.record_stream(p, s2);  // once per stream
  a.deallocate(p);
  REQUIRE(raw.events.size() == 2);
  std::vector<StreamId> recorded;
  for (const auto& [id, e] : raw.events) {
    CHECK(e->recorded);
    recorded.push_back(e->stream);
  }
  std::sort(recorded.begin(), recorded.end(), std::less<StreamId>());
  CHECK(recorded == std::vector<StreamId>{s2, s3});
  CHECK(a.stats().active_bytes == 0);
  {
    const auto snap = a.snapshot();
    REQUIRE(snap.size() == 1);
    CHECK(snap[0].blocks[0].pending);
    CHECK_FALSE(snap[0].blocks[0].allocated);
  }
  // Not handed out while s2's and s3's work may still use it, not even to its own stream.
  void* q = a.allocate(4096, s1);
  CHECK(q != p);
  a.deallocate(q);
  raw.finish_stream(s2);
  void* r = a.allocate(4096, s1);
  CHECK(r != p);  // s3 is still running
  a.deallocate(r);
  // Nor merged with its free neighbours, nor released with the free cache.
  a.empty_cache();
  CHECK(a.stats().segments == 1);
  CHECK(a.snapshot()[0].blocks.size() >= 2);
  // Once every recorded stream is done, the next request finds it again.
  raw.finish_stream(s3);
  CHECK(a.allocate(4096, s1) == p);
  CHECK(raw.events.empty());  // completed events are destroyed
  CHECK(raw.events_created == 2);
  a.deallocate(p);
  check_consistent(a, raw);
  // A free segment again: empty_cache returns it.
  a.empty_cache();
  CHECK(a.stats().segments == 0);
  check_consistent(a, raw);
}

TEST_CASE("cuda allocator: record_stream errors and pending events at destruction", "[cuda-allocator]") {
  FakeRawMemory raw;
  const StreamId s1 = stream(0x10), s2 = stream(0x20);
  {
    CachingDeviceAllocator a(raw);
    int not_ours = 0;
    REQUIRE_THROWS_WITH(a.record_stream(&not_ours, s2), Catch::Contains("not an allocated block"));
    void* p = a.allocate(KiB, s1);
    a.record_stream(p, s2);
    // A failed event leaves the block allocated: the free can be retried.
    raw.fail_record = true;
    REQUIRE_THROWS_WITH(a.deallocate(p), Catch::Contains("event record failed"));
    CHECK(raw.events.empty());
    CHECK(a.stats().active_bytes == CachingDeviceAllocator::round_size(KiB));
    raw.fail_record = false;
    a.deallocate(p);
    CHECK(raw.events.size() == 1);
    REQUIRE_THROWS_AS(a.record_stream(p, s2), define::Error);  // freed
    // Destroyed with the event pending: the event goes too.
  }
  CHECK(raw.events.empty());
  CHECK(raw.live.empty());
}

TEST_CASE("cuda allocator: the destructor does not throw when the raw source fails", "[cuda-allocator]") {
  FakeRawMemory raw;
  {
    CachingDeviceAllocator a(raw);
    a.allocate(KiB);
    a.allocate(5 * MiB);
    raw.fail_free = true;  // e.g. a sticky CUDA error after a kernel fault
  }  // a throw here would terminate the test binary
  CHECK(raw.live.size() == 2);  // leaked, and released by the fake itself
}
