// CUDA execution emulator: streams and events as queues of deferred work.
//
// The emulator runs kernels, copies and memsets synchronously: when the call returns, the work is
// done. That alone hides every missing synchronisation between streams, since nothing is ever
// still running. So work that a library hands to a stream of its own (the emulated NCCL's
// collectives, distributed/nccl/emulated_nccl.cpp) is *deferred*: it waits in the stream's queue
// and runs only when something makes that stream progress:
//   * cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize run it to completion;
//   * cudaEventQuery and cudaStreamQuery advance the stream's first item by one step and say
//     cudaErrorNotReady while the event's work is not done (a collective waiting for another
//     rank stays not ready, as on a GPU); under the random and race schedules a query skips the
//     step at a seeded coin flip, so when polling code sees work finish is permuted too;
//   * cudaStreamWaitEvent(legacy stream, e) runs e's work (the legacy stream is synchronous, so
//     waiting for it there is waiting on the host); on another stream it queues a wait;
//   * a synchronous operation on a stream first completes that stream's queue (stream order).
// Deferred work runs as late as it may, which is the worst case for a missing wait: a buffer read
// before its collective ran holds the unreduced values, a buffer freed and reused while its
// collective is queued is overwritten before it is read.
//
// Ordering after the legacy default stream: every operation on it (launch, copy, memset, GEMM)
// bumps a counter; an event records the count its stream is ordered after, and a stream that waits
// for the event inherits it. A deferred operation that reads device memory produced on the legacy
// stream (a collective's input) is enqueued with `needs_legacy_order`, and is refused when its
// stream has not waited for the legacy stream's latest work: on a GPU it could start before the
// kernels that write its input finish. A blocking stream (created without cudaStreamNonBlocking)
// is ordered after the legacy stream implicitly, and the legacy stream waits for it, as in CUDA.
//
// Single host thread per device is assumed for the queues (as define uses them); the registry of
// live streams is locked.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emu/emu_types.hpp"

namespace cuda_emu {

// A unit of deferred work. advance() makes what progress it can without blocking and returns true
// once the work is complete; it may throw (the error reaches whoever made the stream progress).
struct StreamWork {
  virtual ~StreamWork() = default;
  virtual bool advance() = 0;
};

}  // namespace cuda_emu

struct CUstream_st {
  unsigned flags = 0;
  std::uint64_t id = 0;  // unique over the process: a new stream may reuse a destroyed one's address
  std::deque<std::unique_ptr<cuda_emu::StreamWork>> queue;
  std::uint64_t enqueued = 0;     // work items ever queued here (synchronous operations included)
  std::uint64_t completed = 0;    // of them, those complete (they complete in order)
  std::uint64_t legacy_seen = 0;  // legacy-stream operations this stream is ordered after
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
  CUstream_st* stream = nullptr;  // nullptr: recorded on the legacy stream (complete at once)
  std::uint64_t stream_id = 0;
  std::uint64_t target = 0;       // complete once stream->completed reaches it
  std::uint64_t legacy_seq = 0;   // legacy-stream operations ordered before the event
};

namespace cuda_emu::detail {

struct StreamRegistry {
  std::mutex mu;
  std::set<CUstream_st*> live;
  // Live blocking streams: without any (define creates none), an operation on the legacy stream
  // skips the registry's lock, which it would otherwise take at every launch.
  std::atomic<int> blocking{0};
  static StreamRegistry& instance() {
    static StreamRegistry r;
    return r;
  }
  // `s` exists and is the stream `id` names (not a later one at the same address).
  bool is_live(CUstream_st* s, std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    return live.count(s) != 0 && s->id == id;
  }
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> n{0};
    return ++n;
  }
};

inline std::atomic<std::uint64_t>& legacy_ops() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

inline bool is_blocking(const CUstream_st* s) { return s && (s->flags & 0x1u) == 0; }

// One step of the stream's first item; true when the stream made progress.
inline bool step(CUstream_st* s) {
  if (s->queue.empty()) return false;
  if (!s->queue.front()->advance()) return false;
  s->queue.pop_front();
  ++s->completed;
  return true;
}

// Under the random and race schedules (CUDA_EMU_SCHEDULE) a query declines, at a seeded coin flip,
// to advance work it could advance: a GPU finishes work at its own pace, so code that polls must not
// depend on when it sees the work done.
inline bool query_declines() {
  const Config& c = config();
  if (c.schedule != Schedule::random && c.schedule != Schedule::race) return false;
  static std::mt19937_64 rng(c.seed ^ 0x9E3779B97F4A7C15ULL);
  return (rng() & 1u) != 0;
}

// Runs the stream's work until `target` items are complete (every queued item by default).
inline void drain(CUstream_st* s, std::uint64_t target = UINT64_MAX) {
  target = std::min(target, s->enqueued);
  int idle = 0;
  while (s->completed < target) {
    if (step(s)) {
      idle = 0;
    } else if (++idle < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

inline void drain_blocking_streams() {
  if (StreamRegistry::instance().blocking.load(std::memory_order_relaxed) == 0) return;
  std::vector<CUstream_st*> blocking;
  {
    std::lock_guard<std::mutex> lock(StreamRegistry::instance().mu);
    for (CUstream_st* s : StreamRegistry::instance().live)
      if (is_blocking(s) && !s->queue.empty()) blocking.push_back(s);
  }
  for (CUstream_st* s : blocking) drain(s);
}

// Called before every synchronous operation the emulator runs on `stream`: completes what the
// stream order puts before it, and counts legacy-stream operations.
inline void before_synchronous_op(cudaStream_t stream) {
  if (stream == nullptr) {
    drain_blocking_streams();
    legacy_ops().fetch_add(1, std::memory_order_relaxed);
    return;
  }
  drain(stream);
  ++stream->enqueued;
  ++stream->completed;
  if (is_blocking(stream)) stream->legacy_seen = legacy_ops().load(std::memory_order_relaxed);
}

}  // namespace cuda_emu::detail

namespace cuda_emu {

// True when work queued on `stream` now would run after every legacy-stream operation so far.
inline bool ordered_after_legacy_stream(cudaStream_t stream) {
  if (stream == nullptr || detail::is_blocking(stream)) return true;
  return stream->legacy_seen >= detail::legacy_ops().load(std::memory_order_relaxed);
}

// Queues `work` on `stream`; on the legacy stream it runs to completion now. With
// `needs_legacy_order`, returns false (and queues nothing) when the stream is not ordered after the
// legacy stream's latest operation (see the file comment).
inline bool enqueue(cudaStream_t stream, std::unique_ptr<StreamWork> work, bool needs_legacy_order) {
  if (needs_legacy_order && !ordered_after_legacy_stream(stream)) return false;
  if (stream == nullptr) {
    detail::before_synchronous_op(nullptr);
    while (!work->advance()) std::this_thread::yield();
    return true;
  }
  if (detail::is_blocking(stream)) stream->legacy_seen = detail::legacy_ops().load(std::memory_order_relaxed);
  stream->queue.push_back(std::move(work));
  ++stream->enqueued;
  return true;
}

// Work queued and not yet complete on `stream` (tests).
inline std::size_t pending_work(cudaStream_t stream) { return stream ? stream->queue.size() : 0; }

}  // namespace cuda_emu
