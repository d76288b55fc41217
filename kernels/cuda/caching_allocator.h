// Caching allocator for device memory. cudaMalloc and cudaFree are slow (cudaFree also
// synchronises the whole device), and training allocates and frees the same few sizes
// thousands of times per step, so device memory is taken from the driver in large segments
// and handed out as blocks carved from them; freed blocks go back to a pool, not to the driver.
//
// Pure C++ (no CUDA header): the raw memory source is an interface, so the whole policy is
// unit-tested on the CPU with a fake, and device.cpp plugs in cudaMalloc/cudaFree.
//
// Policy (a reduced version of the well-known PyTorch design):
//  * Requests are rounded up to a multiple of 512 bytes (0 bytes counts as 512, so every
//    allocation is a distinct, valid pointer).
//  * Small pool: rounded requests <= 1 MiB are carved from 2 MiB segments, so many tiny
//    tensors share one driver allocation.
//  * Large pool: requests of 1-10 MiB are carved from 20 MiB segments; bigger requests get a
//    segment of exactly their rounded size.
//  * A request takes the smallest cached block of its pool and stream that fits (best fit). The
//    block is split when the remainder is worth keeping: >= 512 bytes in the small pool (any
//    remainder can serve a future small request), > 1 MiB in the large pool (smaller slivers
//    would only fragment it; they stay attached to the block handed out).
//  * Oversize blocks (segments made for one request of >= 10 MiB) are never split, and serve
//    only oversize requests that leave at most 20 MiB of them unused: a long run that once
//    needed a big buffer must not carve it into small blocks that keep the whole segment alive
//    (PyTorch bounds splitting the same way, max_split_size).
//  * A freed block merges with free neighbours of its segment, so splitting does not
//    fragment memory for good.
//  * Streams: a block belongs to the stream its segment was allocated for and is reused only
//    for requests on that stream. Work on one stream runs in order, so a block freed by the
//    host while a kernel on that stream may still be using it is safe to hand to the next
//    request on the same stream, but not to another stream.
//  * A block used on other streams as well says so with record_stream() (PyTorch's
//    Tensor.record_stream). Its free then records an event on each of those streams and parks
//    the block: it is neither reused nor merged nor released until every event has completed,
//    i.e. until the work queued on those streams at the time of the free has finished. Pending
//    events are polled (never waited for) whenever a request looks for a cached block and on
//    empty_cache(); the block then returns to its own stream's pool.
//  * When the raw source is out of memory, every fully free cached segment is released and
//    the raw allocation retried once; if it fails again define::Error is thrown, naming the
//    device, the request, what tensors hold and what stays cached (as PyTorch does):
//    "cuda:0: out of memory allocating 31457280 bytes (30.0 MiB); 13631488 bytes (13.0 MiB)
//    allocated, 1048576 bytes (1.0 MiB) cached after releasing the free cache ...".
//
// Statistics are exact byte counts: `active` = sizes of the blocks handed out (after rounding,
// including an unsplit remainder), `reserved` = sizes of the segments held from the raw
// source, `cached` = reserved - active. All public methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace define::cuda {

// Opaque stream identity (a cudaStream_t converts implicitly); nullptr = the default stream.
using StreamId = void*;
// Opaque event identity (a cudaEvent_t).
using EventId = void*;

// Where segments come from, and the events that tell when other streams are done with a block:
// the CUDA runtime in the real backend and on the emulated device, fakes in tests.
struct RawDeviceMemory {
  virtual ~RawDeviceMemory() = default;
  // Returns nullptr when out of memory (any other failure may throw).
  virtual void* raw_malloc(std::size_t nbytes) = 0;
  // May throw (a sticky CUDA error); the allocator's destructor swallows it.
  virtual void raw_free(void* ptr) = 0;
  // An event marking the work queued on `stream` so far (create, then record). Both may throw.
  virtual EventId event_create() = 0;
  virtual void event_record(EventId event, StreamId stream) = 0;
  // True once the work the event marks has finished; never blocks. May throw.
  virtual bool event_query(EventId event) = 0;
  // Must not throw: it runs on error and destructor paths.
  virtual void event_destroy(EventId event) noexcept = 0;
};

struct DeviceAllocatorStats {
  std::size_t active_bytes = 0;       // bytes in blocks handed out and not yet freed
  std::size_t peak_active_bytes = 0;  // high-water mark of active_bytes since reset_peak()
  std::size_t reserved_bytes = 0;     // bytes of segments held from the raw source
  std::size_t cached_bytes = 0;       // reserved_bytes - active_bytes
  std::size_t segments = 0;           // segments held from the raw source
  std::uint64_t alloc_count = 0;      // successful allocate() calls
  std::uint64_t raw_mallocs = 0;      // successful raw_malloc calls (segments created)
  std::uint64_t raw_frees = 0;        // raw_free calls (segments released)
  std::uint64_t oom_retries = 0;      // raw out-of-memory events answered by releasing the cache
};

// Read-only picture of the segments and their blocks, in address order (tests, debugging).
struct BlockInfo {
  std::size_t offset = 0;  // from the segment's base
  std::size_t size = 0;
  bool allocated = false;
  bool pending = false;  // freed, waiting for the events of its recorded streams
};
struct SegmentInfo {
  const void* base = nullptr;
  std::size_t size = 0;
  StreamId stream = nullptr;
  bool small_pool = false;
  std::vector<BlockInfo> blocks;
};

class CachingDeviceAllocator {
 public:
  static constexpr std::size_t kMinBlockSize = 512;              // rounding unit
  static constexpr std::size_t kSmallRequest = 1 << 20;          // small pool: requests <= 1 MiB
  static constexpr std::size_t kSmallSegment = 2 << 20;          // small pool segment size
  static constexpr std::size_t kMediumRequest = 10 << 20;        // below: carved from 20 MiB
  static constexpr std::size_t kLargeSegment = 20 << 20;         // segment for 1-10 MiB requests
  static constexpr std::size_t kMinLargeRemainder = 1 << 20;     // split large blocks above this
  static constexpr std::size_t kMaxOversizeWaste = 20 << 20;     // an oversize block's unused part, at most

  // `raw` must outlive the allocator. `device` names it in errors ("cuda:0", "emu:0").
  explicit CachingDeviceAllocator(RawDeviceMemory& raw, std::string device = "device");
  // Returns every segment to the raw source, including segments with blocks still in use
  // (nobody can free those blocks through this allocator any more), and destroys pending events.
  // Never throws: a raw_free that fails leaks its segment.
  ~CachingDeviceAllocator();
  CachingDeviceAllocator(const CachingDeviceAllocator&) = delete;
  CachingDeviceAllocator& operator=(const CachingDeviceAllocator&) = delete;

  // A block of at least `nbytes` usable on `stream`; throws define::Error when out of memory.
  void* allocate(std::size_t nbytes, StreamId stream = nullptr);
  // Returns a block from allocate() to the cache (nullptr is ignored), or parks it until the
  // streams recorded for it are done. Throws define::Error for a pointer this allocator did not
  // hand out (double free, foreign pointer); when recording an event fails, the error propagates
  // and the block stays allocated.
  void deallocate(void* ptr);
  // Notes that work on `stream` uses the block at `ptr` (from allocate(), not yet freed), so that
  // its free waits for that work. Its own stream needs no record and is ignored. Throws
  // define::Error for a pointer that is not an allocated block.
  void record_stream(void* ptr, StreamId stream);

  DeviceAllocatorStats stats() const;
  void reset_peak();
  // Releases every fully free segment to the raw source: afterwards reserved_bytes covers
  // only segments with blocks in use.
  void empty_cache();
  std::vector<SegmentInfo> snapshot() const;

  static std::size_t round_size(std::size_t nbytes);
  // Size of the segment created for a rounded request that no cached block can serve.
  static std::size_t segment_size(std::size_t rounded);

 private:
  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    StreamId stream = nullptr;
    bool small_pool = false;
    bool oversize = false;  // the whole of a segment made for one request >= kMediumRequest
    bool allocated = false;
    bool pending = false;             // freed, waiting for events on other streams
    int pending_events = 0;           // events still to complete while pending
    std::vector<StreamId> stream_uses;  // other streams recorded while allocated
    Block* prev = nullptr;  // neighbours inside the same segment, in address order
    Block* next = nullptr;

    // Free and not waiting: may be handed out, merged or released.
    bool is_free() const { return !allocated && !pending; }
  };
  struct PendingEvent {
    EventId event;
    Block* block;
  };
  // Free blocks ordered by (stream, size, address): lower_bound finds the best fit.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreePool = std::set<Block*, BlockOrder>;

  FreePool& pool_for(bool small) { return small ? small_free_ : large_free_; }
  Block* find_free_block(FreePool& pool, StreamId stream, std::size_t size);
  Block* create_segment(std::size_t size, bool small, StreamId stream, std::size_t request);
  void split_block(Block* block, std::size_t size);
  void free_block(Block* block);
  void process_events();
  void release_free_segments();
  void note_active_change();

  RawDeviceMemory& raw_;
  std::string device_;
  mutable std::mutex mu_;
  FreePool small_free_;
  FreePool large_free_;
  std::unordered_map<void*, Block*> active_;  // block pointer -> block handed out
  std::vector<Block*> segments_;              // first block of every segment held
  std::vector<PendingEvent> pending_events_;  // in the order they were recorded
  DeviceAllocatorStats stats_;
};

}  // namespace define::cuda
