#include "kernels/cuda/caching_allocator.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "core/error.h"

namespace define::cuda {

bool CachingDeviceAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  // std::less gives a total order on unrelated pointers (the stream ids and block addresses).
  if (a->stream != b->stream) return std::less<StreamId>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingDeviceAllocator::CachingDeviceAllocator(RawDeviceMemory& raw, std::string device)
    : raw_(raw), device_(std::move(device)) {}

CachingDeviceAllocator::~CachingDeviceAllocator() {
  for (const PendingEvent& e : pending_events_) raw_.event_destroy(e.event);
  for (Block* head : segments_) {
    // A destructor must not throw (it may run while an exception unwinds, and it is noexcept):
    // a raw source in a sticky-error state keeps its segment.
    try {
      raw_.raw_free(head->ptr);
    } catch (...) {
    }
    for (Block* b = head; b;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

std::size_t CachingDeviceAllocator::round_size(std::size_t nbytes) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  return (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

std::size_t CachingDeviceAllocator::segment_size(std::size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMediumRequest) return kLargeSegment;
  return rounded;
}

void* CachingDeviceAllocator::allocate(std::size_t nbytes, StreamId stream) {
  const std::size_t size = round_size(nbytes);
  const bool small = size <= kSmallRequest;
  std::lock_guard<std::mutex> lock(mu_);
  process_events();
  FreePool& pool = pool_for(small);
  Block* block = find_free_block(pool, stream, size);
  if (block) {
    pool.erase(block);
  } else {
    block = create_segment(segment_size(size), small, stream, nbytes);
    block->oversize = size >= kMediumRequest;
  }
  // Keep the remainder as a free block of its own when it can serve a later request; in the
  // large pool only when it is big enough not to fragment the pool into slivers.
  const std::size_t remainder = block->size - size;
  if (!block->oversize && (small ? remainder >= kMinBlockSize : remainder > kMinLargeRemainder)) split_block(block, size);

  block->allocated = true;
  active_.emplace(block->ptr, block);
  stats_.active_bytes += block->size;
  ++stats_.alloc_count;
  note_active_change();
  return block->ptr;
}

void CachingDeviceAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  if (it == active_.end())
    fail("cuda allocator", "free of pointer {} that is not an allocated block (double free?)", ptr);
  Block* block = it->second;
  // Every event first: if one fails, nothing has changed and the block is still allocated.
  std::vector<PendingEvent> events;
  events.reserve(block->stream_uses.size());
  try {
    for (StreamId s : block->stream_uses) {
      events.push_back({raw_.event_create(), block});
      raw_.event_record(events.back().event, s);
    }
  } catch (...) {
    for (const PendingEvent& e : events) raw_.event_destroy(e.event);
    throw;
  }
  active_.erase(it);
  block->allocated = false;
  block->stream_uses.clear();
  stats_.active_bytes -= block->size;
  note_active_change();
  if (!events.empty()) {
    block->pending = true;
    block->pending_events = static_cast<int>(events.size());
    pending_events_.insert(pending_events_.end(), events.begin(), events.end());
    return;
  }
  free_block(block);
}

void CachingDeviceAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  if (it == active_.end()) fail("cuda allocator", "record_stream of pointer {} that is not an allocated block", ptr);
  Block* block = it->second;
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
    block->stream_uses.push_back(stream);
}

// Polls the pending events; a block whose last event has completed goes back to its pool. Called
// with mu_ held. A failing query propagates and leaves that event pending.
void CachingDeviceAllocator::process_events() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_events_.size(); ++i) {
    const PendingEvent e = pending_events_[i];
    bool done = false;
    try {
      done = raw_.event_query(e.event);
    } catch (...) {
      // Keep the unvisited events: close the gap before propagating.
      std::move(pending_events_.begin() + static_cast<std::ptrdiff_t>(i), pending_events_.end(),
                pending_events_.begin() + static_cast<std::ptrdiff_t>(kept));
      pending_events_.resize(kept + pending_events_.size() - i);
      throw;
    }
    if (!done) {
      pending_events_[kept++] = e;
      continue;
    }
    raw_.event_destroy(e.event);
    if (--e.block->pending_events == 0) {
      e.block->pending = false;
      free_block(e.block);
    }
  }
  pending_events_.resize(kept);
}

// Merges a block that is no longer allocated nor pending with its free neighbours and puts it in
// its pool.
void CachingDeviceAllocator::free_block(Block* block) {
  FreePool& pool = pool_for(block->small_pool);
  // Merge with free neighbours: the lower block absorbs the upper one, so a segment's head
  // block stays its head.
  if (Block* next = block->next; next && next->is_free()) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next) block->next->prev = block;
    delete next;
  }
  if (Block* prev = block->prev; prev && prev->is_free()) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  pool.insert(block);
}

CachingDeviceAllocator::Block* CachingDeviceAllocator::find_free_block(FreePool& pool, StreamId stream,
                                                                       std::size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;  // lowest address of that (stream, size): the first candidate
  // Ascending sizes of this stream: the first block that may serve the request is the best fit.
  for (auto it = pool.lower_bound(&key); it != pool.end() && (*it)->stream == stream; ++it) {
    const Block* b = *it;
    if (b->oversize && (size < kMediumRequest || b->size - size > kMaxOversizeWaste)) continue;
    return *it;
  }
  return nullptr;
}

CachingDeviceAllocator::Block* CachingDeviceAllocator::create_segment(std::size_t size, bool small,
                                                                      StreamId stream, std::size_t request) {
  void* p = raw_.raw_malloc(size);
  if (!p) {
    // Cached segments of any stream may be what stands in the way: give them back, retry once.
    ++stats_.oom_retries;
    release_free_segments();
    p = raw_.raw_malloc(size);
  }
  if (!p) {
    auto mib = [](std::size_t n) { return static_cast<double>(n) / (1 << 20); };
    fail(device_, "out of memory allocating {} bytes ({:.1f} MiB); {} bytes ({:.1f} MiB) allocated, {} bytes "
                  "({:.1f} MiB) cached after releasing the free cache and retrying (a smaller batch or sequence "
                  "length needs less)", request, mib(request), stats_.active_bytes, mib(stats_.active_bytes),
         stats_.cached_bytes, mib(stats_.cached_bytes));
  }
  Block* b = new Block;
  b->ptr = static_cast<char*>(p);
  b->size = size;
  b->stream = stream;
  b->small_pool = small;
  segments_.push_back(b);
  ++stats_.raw_mallocs;
  ++stats_.segments;
  stats_.reserved_bytes += size;
  stats_.cached_bytes = stats_.reserved_bytes - stats_.active_bytes;
  return b;
}

void CachingDeviceAllocator::split_block(Block* block, std::size_t size) {
  Block* rest = new Block;
  rest->ptr = block->ptr + size;
  rest->size = block->size - size;
  rest->stream = block->stream;
  rest->small_pool = block->small_pool;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next) rest->next->prev = rest;
  block->next = rest;
  block->size = size;
  pool_for(rest->small_pool).insert(rest);
}

void CachingDeviceAllocator::release_free_segments() {
  // A segment is fully free when its head block is free and has no neighbour (coalescing on
  // free guarantees a free segment is always one block).
  auto fully_free = [](const Block* head) { return head->is_free() && !head->next; };
  for (Block*& head : segments_) {
    if (!fully_free(head)) continue;
    pool_for(head->small_pool).erase(head);
    raw_.raw_free(head->ptr);
    ++stats_.raw_frees;
    --stats_.segments;
    stats_.reserved_bytes -= head->size;
    delete head;
    head = nullptr;
  }
  std::erase_if(segments_, [](const Block* head) { return head == nullptr; });
  stats_.cached_bytes = stats_.reserved_bytes - stats_.active_bytes;
}

void CachingDeviceAllocator::note_active_change() {
  stats_.peak_active_bytes = std::max(stats_.peak_active_bytes, stats_.active_bytes);
  stats_.cached_bytes = stats_.reserved_bytes - stats_.active_bytes;
}

DeviceAllocatorStats CachingDeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingDeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_active_bytes = stats_.active_bytes;
}

void CachingDeviceAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  process_events();
  release_free_segments();
}

std::vector<SegmentInfo> CachingDeviceAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SegmentInfo> out;
  out.reserve(segments_.size());
  for (const Block* head : segments_) {
    SegmentInfo seg;
    seg.base = head->ptr;
    seg.stream = head->stream;
    seg.small_pool = head->small_pool;
    for (const Block* b = head; b; b = b->next) {
      seg.blocks.push_back({static_cast<std::size_t>(b->ptr - head->ptr), b->size, b->allocated, b->pending});
      seg.size += b->size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return std::less<const void*>()(a.base, b.base); });
  return out;
}

}  // namespace define::cuda
