// CUDA execution emulator, part 3 of 6: the block runner. One Runner per OS thread runs one block
// at a time, start to finish: a slot per CUDA thread, a pool of fibers, and a run queue.
//
//  * Fibers are lazy: a thread gets a fresh fiber only when the previous one blocked; when a thread
//    returns, the same fiber starts the next unstarted thread without any switch. A barrier-free
//    block therefore runs on one fiber.
//  * Switching is direct: a blocking thread picks the next runnable thread and jumps to it. The OS
//    thread's own stack ("host") is only resumed when the block ends or fails.
//  * __syncthreads(): a thread records its call site and blocks. When nothing is runnable and no
//    thread is unstarted, every live thread must be waiting at a barrier: it is released (checking
//    that all wait at the same call site), otherwise it is a deadlock. Returned threads count as
//    arrived, as on hardware, unless config().strict.
//  * Warp intrinsics: each lane publishes a value and the lane it wants to read, then blocks. The
//    last lane of the mask to arrive (lanes that do not exist or have returned are not waited for)
//    computes every lane's result at once and puts the lanes at the front of the run queue, so the
//    warp continues while its stacks are hot.
//    Every lane of a group must call from the same place (sm_6x executes a warp collective only
//    in convergence), and a shuffle may read only lanes of its mask.
//  * Warp-wide collectives of the .sync.aligned kind (mma.sync, ldmatrix: emu_mma.hpp) use the same
//    groups with the full mask, each lane leaving a pointer to its operands: all 32 lanes of the
//    warp must exist, none may have returned (one that returns while the others wait fails the
//    block), and the last to arrive computes every lane's result with the collective's function.
//  * Static shared memory (EMU_STATIC_SHARED) lives in a per-block arena: counted against the
//    architecture's per-block limit together with the dynamic shared memory, NaN-filled in debug
//    mode, and followed by canary bytes checked when the block ends (an overflow is an error).
//  * The race schedule (emu_race.hpp) makes a thread give way at its global and shared memory
//    accesses (seeded coin flips): it goes to the back of the run queue, or an unstarted thread
//    starts, so interleavings that a GPU produces between barriers happen here too.
//  * Errors abort the block: suspended fibers are abandoned (their stacks are recycled) and the
//    message goes back to launch(), which throws kernel_error on the host.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_emu/emu_fiber.hpp"
#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_profile.hpp"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu::detail {

inline constexpr int kMaxBlockThreads = 1024;
inline constexpr std::size_t kMaxDynamicSmem = 227 * 1024;

enum class ThreadState : std::uint8_t { unstarted, running, runnable, at_barrier, at_warp, done };
enum class BarrierKind : std::uint8_t { plain, count, all, any };

// One asynchronous copy in flight (cp.async, emu_async_copy.hpp): its source bytes, read when it
// was issued, land at dst when the issuing thread waits for its group.
struct AsyncCopy {
  void* dst = nullptr;
  const void* pc = nullptr;  // the cp.async instruction (the profile's shared-memory side)
  std::uint32_t group = 0;   // 0 until committed, then the thread's group number (1, 2, ...)
  std::uint32_t bytes = 0;
  unsigned char data[16] = {};
};

// One CUDA thread of the running block.
struct Slot {
  uint3 tid{0, 0, 0};
  int linear = 0, warp = 0, lane = 0;
  ThreadState state = ThreadState::unstarted;
  Fiber* fiber = nullptr;
  // __syncthreads call site and predicate
  const char* bfile = nullptr;
  int bline = 0;
  BarrierKind bkind = BarrierKind::plain;
  bool bpred = false;
  // warp intrinsic: its call site, what this lane offers and asks for, and its result
  const char* wop = nullptr;
  const char* wfile = nullptr;
  int wline = 0;
  std::uint32_t wmask = 0;
  std::uint64_t win = 0, wout = 0;
  int wsrc = 0;
  bool wpred = false;
  std::uint32_t wballot = 0, wgroup = 0;
  void* wdata = nullptr;  // a warp-wide collective's operands and results (on this thread's stack)
  // cp.async: the copies this thread has issued and not waited for, and the groups it committed.
  std::vector<AsyncCopy> copies;
  std::uint32_t copy_groups = 0;
};

// Computes a warp-wide collective once every lane has arrived: lanes[l] is lane l's wdata.
using WarpCollectiveFn = void (*)(void* const* lanes);

// Lanes of one warp gathering in one intrinsic with one mask.
struct WarpGroup {
  std::uint32_t mask = 0, arrived = 0;
  const char* op = nullptr;
  const Slot* first = nullptr;  // the first lane to arrive: its call site is the group's
  WarpCollectiveFn collective = nullptr;  // set for a warp-wide collective (warp_collective)
};

// Where a kernel declares a static shared array (EMU_STATIC_SHARED): one per declaration.
struct SharedSite {
  const char* name;
  const char* file;
  int line;
};

struct WarpState {
  std::uint32_t exists = 0, exited = 0;
  int ngroups = 0;
  WarpGroup groups[32];  // a waiting lane is in exactly one group, so 32 suffice
};

// Everything a block needs from its launch.
struct LaunchJob {
  void (*invoke)(const void* bound) = nullptr;  // calls the kernel with the bound arguments
  const void* bound = nullptr;
  const void* kernel = nullptr;  // the kernel function, identifying its shared-memory opt-in
  dim3 grid, block;
  std::size_t smem = 0;
  std::size_t smem_block_limit = 0;  // static + dynamic shared memory a block may use (set by check_launch)
  Config config;
  // Profiling mode (emu_profile.hpp): where the recorded blocks' accesses go, and which blocks are
  // recorded (those whose linear index is a multiple of the stride).
  LaunchRecorder* recorder = nullptr;
  std::uint64_t record_stride = 1;
};

class Runner;
// The runner executing a block on this OS thread; null outside kernels.
inline thread_local Runner* tls_runner = nullptr;

inline std::string call_site(const char* file, int line) {
  const char* slash = file ? std::strrchr(file, '/') : nullptr;
  return cat(slash ? slash + 1 : (file ? file : "?"), ":", line);
}

inline std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

class Runner {
 public:
  Runner() = default;
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  ~Runner() {
    if (smem_map_) munmap(smem_map_, smem_map_bytes_);
  }

  // Runs one block to completion on this OS thread. Returns false (with the message) on failure.
  CUDA_EMU_UNINSTRUMENTED bool run_block(const LaunchJob& job, uint3 block_index, std::uint64_t block_linear,
                                         std::string& error);

  // Device-side operations of the current CUDA thread.
  CUDA_EMU_UNINSTRUMENTED int barrier(const char* file, int line, BarrierKind kind, bool pred);
  CUDA_EMU_UNINSTRUMENTED std::uint64_t warp_op(const char* op, std::uint32_t mask, std::uint64_t value, int src_lane,
                                                bool pred, std::uint32_t* ballot, std::uint32_t* group,
                                                const char* file, int line);
  // A warp-wide collective of the .sync.aligned kind (mma.sync, ldmatrix; emu_mma.hpp): every lane
  // of the warp calls it from the same place with its operands in `data`; the last to arrive runs
  // `compute` over all 32 lanes' data, then every lane carries on. Fails the block when the warp
  // is partial, a lane of it has returned (or returns while the others wait), or lanes diverge.
  CUDA_EMU_UNINSTRUMENTED void warp_collective(const char* op, void* data, WarpCollectiveFn compute, const char* file,
                                               int line);
  // The block's copy of a static shared array: the same address for every thread of the block.
  CUDA_EMU_UNINSTRUMENTED void* static_shared(const SharedSite* site, std::size_t bytes, std::size_t align);
  // Empty when [p, p + bytes) lies inside the launch's dynamic shared memory or inside one static
  // shared array of the block; otherwise what is wrong with it, for a message.
  CUDA_EMU_UNINSTRUMENTED std::string shared_span_problem(const void* p, std::size_t bytes) const;
  // The emulated architecture (CUDA_EMU_ARCH at the launch), e.g. 75 for sm_75.
  CUDA_EMU_UNINSTRUMENTED int arch() const { return job_->config.arch; }
  // Race schedule (emu_race.hpp calls it at every instrumented memory access of this OS thread):
  // maybe let another thread run before this access to `address`. Not instrumented itself, or its
  // own reads would call it again before the guard is set.
  CUDA_EMU_UNINSTRUMENTED void race_hook(const void* address) {
    if (!racing_ || in_race_hook_ || !cur_ || cur_->state != ThreadState::running) return;
    in_race_hook_ = true;  // owner_of's own (instrumented) accesses come back here
    if ((next_random() & 3u) == 0 && (is_shared(address) || owner_of(address) >= 0)) yield_current();
    in_race_hook_ = false;
  }
  // Every instrumented access (emu_race.hpp): the race schedule's switch point, then the profile's
  // record. kind: AccessKind's read / write / atomic; pc: the instruction.
  // Outside the race schedule and the profile, the common case, this is two loads and a return:
  // the work is out of line, so the hook needs no stack frame (with it inlined, every access
  // saved and restored six registers first, a tenth of an emulated training step's time).
  CUDA_EMU_UNINSTRUMENTED void access_hook(const void* address, unsigned bytes, unsigned kind, const void* pc) {
    if (racing_ || recording_) [[unlikely]]
      watched_access(address, bytes, kind, pc);
  }
  // Profiling: matrix FLOPs (2 M N K per mma.sync) a lane of a recorded block issued, scaled to the grid.
  CUDA_EMU_UNINSTRUMENTED void count_tensor_flops(double flops) {
    if (recording_) job_->recorder->profile.tensor_flops += flops * job_->recorder->block_weight;
  }
  CUDA_EMU_UNINSTRUMENTED std::uint32_t active_mask() const {
    const WarpState& w = warps_[cur_->warp];
    return w.exists & ~w.exited;
  }
  CUDA_EMU_UNINSTRUMENTED int lane() const { return cur_->lane; }
  // The current thread's slot (its cp.async copies in flight: emu_async_copy.hpp).
  CUDA_EMU_UNINSTRUMENTED Slot& current_slot() { return *cur_; }
  CUDA_EMU_UNINSTRUMENTED bool debug() const { return job_->config.debug; }
  CUDA_EMU_UNINSTRUMENTED unsigned char* dynamic_smem() const { return dyn_ptr_; }
  CUDA_EMU_UNINSTRUMENTED std::string current_thread() const { return cat("thread ", format_index(cur_->tid)); }

  // Aborts the block with `message`; never returns. The frames of the failing fiber are abandoned,
  // so callers build the message in a statement of its own (no temporaries pending) and move it in.
  [[noreturn]] CUDA_EMU_UNINSTRUMENTED void fail(std::string message) {
    error_ = std::move(message);
    abort_block();
  }

 private:
  CUDA_EMU_UNINSTRUMENTED static void fiber_entry(bctx::transfer_t t) {
    Runner* r = tls_runner;
    Fiber* self = r->starting_;
    r->landed(t, self);
    r->fiber_loop(self);
  }

  [[noreturn]] CUDA_EMU_UNINSTRUMENTED void fiber_loop(Fiber* self);
  CUDA_EMU_UNINSTRUMENTED void run_thread(Slot* s);
  CUDA_EMU_UNINSTRUMENTED void thread_exited(Slot* s);
  CUDA_EMU_UNINSTRUMENTED void block_current(Slot* s);
  CUDA_EMU_UNINSTRUMENTED void release_barrier_or_fail();
  CUDA_EMU_UNINSTRUMENTED int find_group(WarpState& w, std::uint32_t mask, const char* op);
  CUDA_EMU_UNINSTRUMENTED void complete_group(WarpState& w, int warp, int group, const Slot* caller);
  CUDA_EMU_UNINSTRUMENTED void setup_dynamic_smem(const LaunchJob& job);
  CUDA_EMU_UNINSTRUMENTED std::string static_smem_overflow() const;
  CUDA_EMU_UNINSTRUMENTED bool is_shared(const void* p) const;
  CUDA_EMU_UNINSTRUMENTED void record_access(const void* address, unsigned bytes, unsigned kind, const void* pc);
  __attribute__((noinline)) CUDA_EMU_UNINSTRUMENTED void watched_access(const void* address, unsigned bytes,
                                                                        unsigned kind, const void* pc) {
    if (racing_) race_hook(address);
    if (recording_) record_access(address, bytes, kind, pc);
  }
  CUDA_EMU_UNINSTRUMENTED void yield_current();
  CUDA_EMU_UNINSTRUMENTED std::string deadlock_message() const;

  [[noreturn]] CUDA_EMU_UNINSTRUMENTED void abort_block() {
    aborted_ = true;
    switch_to(cur_fiber_, &host_, false);
    __builtin_unreachable();
  }

  CUDA_EMU_UNINSTRUMENTED void enter(Slot* s) {
    cur_ = s;
    s->state = ThreadState::running;
    threadIdx = s->tid;
    in_race_hook_ = false;  // a thread that gave way inside race_hook resumes here, or a new one starts
  }
  CUDA_EMU_UNINSTRUMENTED static void bind(Fiber* f, Slot* s) {
    f->slot = s;
    s->fiber = f;
  }
  CUDA_EMU_UNINSTRUMENTED Slot* take_unstarted() { return &slots_[order_[next_unstarted_++]]; }

  CUDA_EMU_UNINSTRUMENTED Fiber* acquire_fiber() {
    if (!free_.empty()) {
      Fiber* f = free_.back();
      free_.pop_back();
      return f;
    }
    auto f = std::make_unique<Fiber>();
    map_stack(*f, stack_bytes_);
    f->index = int(fibers_.size());
    fibers_.push_back(std::move(f));
    return fibers_.back().get();
  }

  // Jumps from `from` to `to`. Returns when `from` is resumed; never, if !from_resumes.
  CUDA_EMU_UNINSTRUMENTED void switch_to(Fiber* from, Fiber* to, bool from_resumes) {
    before_switch(from_resumes ? &from->fake_stack : nullptr, *to);
    bctx::transfer_t t = bctx::jump_fcontext(to->ctx, from);
    landed(t, from);
  }
  // Starts a fresh context on `f` (for the thread bound to it) and jumps there.
  CUDA_EMU_UNINSTRUMENTED void start(Fiber* from, Fiber* f, bool from_resumes) {
    make_context(*f, &Runner::fiber_entry);
    starting_ = f;
    switch_to(from, f, from_resumes);
  }
  // First thing after arriving on `self`'s stack: remember where the previous context stopped.
  CUDA_EMU_UNINSTRUMENTED void landed(bctx::transfer_t t, Fiber* self) {
    const void* lo = nullptr;
    std::size_t bytes = 0;
    after_switch(*self, &lo, &bytes);
    Fiber* from = static_cast<Fiber*>(t.data);
    from->ctx = t.fctx;
    if (from == &host_) {
      host_.stack_lo = static_cast<char*>(const_cast<void*>(lo));
      host_.stack_bytes = bytes;
    }
    cur_fiber_ = self;
  }

  // Run queue: a ring of slot indices (each slot at most once, so 1024 entries suffice).
  CUDA_EMU_UNINSTRUMENTED bool queue_empty() const { return qhead_ == qtail_; }
  CUDA_EMU_UNINSTRUMENTED void push_back(int i) { queue_[qtail_++ & 1023u] = i; }
  CUDA_EMU_UNINSTRUMENTED void push_front(int i) { queue_[--qhead_ & 1023u] = i; }
  CUDA_EMU_UNINSTRUMENTED int pop_front() { return queue_[qhead_++ & 1023u]; }

  CUDA_EMU_UNINSTRUMENTED std::uint64_t next_random() {  // splitmix64
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Reorders ascending thread ids by the schedule policy.
  CUDA_EMU_UNINSTRUMENTED void apply_policy(int* ids, int k) {
    if (job_->config.schedule == Schedule::reverse) {
      std::reverse(ids, ids + k);
    } else if (job_->config.schedule == Schedule::random) {
      for (int i = k - 1; i > 0; --i) std::swap(ids[i], ids[next_random() % std::uint64_t(i + 1)]);
    }
  }

  const LaunchJob* job_ = nullptr;
  int n_ = 0, done_ = 0, at_barrier_ = 0, next_unstarted_ = 0;
  int barrier_result_ = 0;
  bool aborted_ = false;
  std::string error_;

  Slot* cur_ = nullptr;
  Fiber* cur_fiber_ = nullptr;
  Fiber* starting_ = nullptr;
  Fiber host_;  // the OS thread's own stack
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Fiber*> free_;
  std::size_t stack_bytes_ = 0;

  std::array<Slot, kMaxBlockThreads> slots_;
  std::array<WarpState, kMaxBlockThreads / 32> warps_;
  std::array<int, kMaxBlockThreads> order_{};    // start order of the threads
  std::array<int, kMaxBlockThreads> queue_{};    // runnable, suspended threads
  std::array<int, kMaxBlockThreads> scratch_{};  // barrier release list
  unsigned qhead_ = 0, qtail_ = 0;
  std::uint64_t rng_ = 0;

  unsigned char* smem_map_ = nullptr;  // dynamic shared memory, ends at a PROT_NONE page
  std::size_t smem_map_bytes_ = 0;
  unsigned char* smem_end_ = nullptr;
  unsigned char* dyn_ptr_ = nullptr;

  // Static shared memory: the arena, and what this block placed in it (each entry is followed by
  // kCanaryBytes of kCanary).
  static constexpr std::size_t kCanaryBytes = 16;
  static constexpr unsigned char kCanary = 0xA5;
  struct StaticEntry {
    const SharedSite* site;
    std::size_t offset, bytes;
  };
  std::unique_ptr<unsigned char[]> static_arena_;
  std::size_t static_arena_bytes_ = 0;
  std::vector<StaticEntry> static_entries_;
  std::size_t static_used_ = 0;     // arena bytes taken, canaries included
  std::size_t static_counted_ = 0;  // bytes counted against the block's limit (as the GPU lays them out)
  bool racing_ = false;             // the race schedule is on for this block
  bool in_race_hook_ = false;

  // Profiling: this block's accesses, and each thread's count of executions per instruction.
  bool recording_ = false;
  bool in_record_ = false;  // the recorder's own instrumented accesses come back to the hook
  bool quiet_ = false;      // the emulator itself is writing shared memory (static_shared's canaries)
  std::vector<RecordedAccess> recorded_;
  std::unordered_map<std::uint64_t, std::uint32_t> executions_;
  // The instructions each warp's lanes executed since the warp last converged (a full-warp
  // collective or a barrier): there the lanes' counts are aligned (align_executions).
  std::vector<const void*> warp_pcs_[kMaxBlockThreads / 32];
  std::uintptr_t device_lo_ = 0, device_hi_ = 0;  // the device allocation the last access fell in

  CUDA_EMU_UNINSTRUMENTED void align_executions(int warp);
};

// ---------------------------------------------------------------------------------------------

inline bool Runner::run_block(const LaunchJob& job, uint3 block_index, std::uint64_t block_linear,
                              std::string& error) {
  job_ = &job;
  const std::size_t want_stack = job.config.stack_kb * 1024;
  if (want_stack != stack_bytes_) {  // stack size changed: drop the old fibers
    free_.clear();
    fibers_.clear();
    stack_bytes_ = want_stack;
  }
  blockIdx = block_index;
  blockDim = job.block;
  gridDim = job.grid;

  const unsigned bx = job.block.x, by = job.block.y;
  n_ = int(job.block.x * job.block.y * job.block.z);
  for (int i = 0; i < n_; ++i) {
    Slot& s = slots_[i];
    const unsigned u = unsigned(i);
    s.tid = uint3{u % bx, (u / bx) % by, u / (bx * by)};
    s.linear = i;
    s.warp = i >> 5;
    s.lane = i & 31;
    s.state = ThreadState::unstarted;
    s.fiber = nullptr;
    s.copies.clear();
    s.copy_groups = 0;
    order_[i] = i;
  }
  const int nwarps = (n_ + 31) / 32;
  for (int w = 0; w < nwarps; ++w) {
    const int lanes = std::min(32, n_ - 32 * w);
    warps_[w].exists = lanes == 32 ? ~0u : (1u << lanes) - 1u;
    warps_[w].exited = 0;
    warps_[w].ngroups = 0;
  }
  // Seeded per block, so the order does not depend on which OS thread runs the block.
  rng_ = job.config.seed ^ ((block_linear + 1) * 0xd1b54a32d192ed03ull);
  apply_policy(order_.data(), n_);
  next_unstarted_ = done_ = at_barrier_ = 0;
  qhead_ = qtail_ = 0;
  aborted_ = false;
  setup_dynamic_smem(job);
  static_entries_.clear();
  static_used_ = static_counted_ = 0;
  racing_ = job.config.schedule == Schedule::race;
  recording_ = job.recorder && block_linear % job.record_stride == 0;
  quiet_ = false;
  recorded_.clear();
  executions_.clear();
  for (auto& pcs : warp_pcs_) pcs.clear();

  Fiber* first = acquire_fiber();
  bind(first, take_unstarted());
  tls_runner = this;
  start(&host_, first, true);  // back here when the block has finished or failed
  tls_runner = nullptr;

  if (aborted_) {  // suspended fibers are abandoned; all stacks become free again
    free_.clear();
    for (auto& f : fibers_) free_.push_back(f.get());
    error = std::move(error_);
    error_.clear();
    return false;
  }
  if (std::string overflow = static_smem_overflow(); !overflow.empty()) {
    error = std::move(overflow);
    return false;
  }
  if (recording_) {
    recording_ = false;
    job.recorder->profile.static_smem = std::max(job.recorder->profile.static_smem, static_counted_);
    job.recorder->add_block(recorded_);
  }
  return true;
}

inline void Runner::record_access(const void* address, unsigned bytes, unsigned kind, const void* pc) {
  if (in_record_ || quiet_ || !cur_ || cur_->state != ThreadState::running) return;
  in_record_ = true;
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::uint8_t k = std::uint8_t(kind);
  bool keep = true;
  if (is_shared(address)) {
    k |= kShared;
  } else if (a < device_lo_ || a >= device_hi_) {
    keep = device_block_of(address, device_lo_, device_hi_);
  }
  if (keep) {
    std::uint32_t& n =
        executions_[(std::uint64_t(reinterpret_cast<std::uintptr_t>(pc)) << 10) | std::uint64_t(cur_->linear)];
    const std::uint32_t instance = n++;  // counted even when merged below, so lanes stay paired
    std::vector<const void*>& pcs = warp_pcs_[cur_->linear / 32];
    if (std::find(pcs.begin(), pcs.end(), pc) == pcs.end()) pcs.push_back(pc);
    // g++ splits a copy of an aligned structure (a float4, a packed vector, an 8-byte pair) into
    // its fields, where nvcc emits one 64- or 128-bit access: back-to-back accesses of one thread
    // and kind that continue an access, up to 16 bytes in all, are merged into it when its start
    // is aligned to the merged size (rounded up to a power of two).
    RecordedAccess* last = recorded_.empty() ? nullptr : &recorded_.back();
    const std::uint32_t merged = last ? last->bytes + bytes : 0;
    if (last && last->thread == cur_->linear && last->kind == k && a == last->address + last->bytes && merged <= 16 &&
        last->address % std::bit_ceil(merged) == 0) {
      last->bytes += bytes;
    } else {
      recorded_.push_back(RecordedAccess{pc, a, instance, bytes, std::uint16_t(cur_->linear), k});
    }
  }
  in_record_ = false;
}

// SIMT hardware issues an instruction once for the warp, whichever lanes take part: a lane that
// skipped an access under a branch (the tail of a row, a masked element) has still passed that
// warp-level instance. Where the warp converges, every lane's count of each instruction executed
// since the last convergence is raised to the highest, so the lanes' next executions pair up as
// the warp's next requests (a lane left behind would otherwise form requests of its own).
inline void Runner::align_executions(int warp) {
  std::vector<const void*>& pcs = warp_pcs_[warp];
  for (const void* pc : pcs) {
    const std::uint64_t base = std::uint64_t(reinterpret_cast<std::uintptr_t>(pc)) << 10;
    std::uint32_t most = 0;
    for (int l = 0; l < 32; ++l)
      if (auto it = executions_.find(base | std::uint64_t(warp * 32 + l)); it != executions_.end())
        most = std::max(most, it->second);
    for (int l = 0; l < 32 && warp * 32 + l < n_; ++l) executions_[base | std::uint64_t(warp * 32 + l)] = most;
  }
  pcs.clear();
}

inline void* Runner::static_shared(const SharedSite* site, std::size_t bytes, std::size_t align) {
  for (const StaticEntry& e : static_entries_)
    if (e.site == site) return static_arena_.get() + e.offset;
  quiet_ = true;         // the canaries and fill below are not the kernel's accesses
  if (!static_arena_) {  // room for the largest block budget plus a canary per declaration
    static_arena_bytes_ = kMaxDynamicSmem + 64 * (kCanaryBytes + 32);
    static_arena_ = std::make_unique<unsigned char[]>(static_arena_bytes_);
  }
  // nvcc guarantees an array its declared alignment (the element type's, or __align__'s) and no more,
  // so the array lies at exactly that: 2-byte words at 2 mod 16. A 16-byte access or an ldmatrix row
  // that needs EMU_STATIC_SHARED_ALIGN16 is then misaligned here as it may be on a GPU (ldmatrix's
  // check, UBSan), where a generous placement would hide it.
  const std::size_t block = std::max<std::size_t>(align, 16);
  const std::size_t offset = (static_used_ + block - 1) / block * block + (align < 16 ? align : 0);
  const std::size_t counted = (static_counted_ + align - 1) / align * align + bytes;
  if (counted + job_->smem > job_->smem_block_limit) {
    std::string message = cat("static shared memory: ", site->name, " (", call_site(site->file, site->line), ", ",
                              bytes, " bytes) brings the block to ", counted, " bytes of static and ", job_->smem,
                              " of dynamic shared memory, more than the ", job_->smem_block_limit, " a block may use on sm_",
                              job_->config.arch);
    fail(std::move(message));
  }
  if (offset + bytes + kCanaryBytes > static_arena_bytes_ || static_entries_.size() >= 64) {
    std::string message = cat("static shared memory: ", site->name, " (", call_site(site->file, site->line),
                              "): more than 64 declarations in one kernel");
    fail(std::move(message));
  }
  unsigned char* p = static_arena_.get() + offset;
  // A GPU leaves whatever the previous block wrote; debug mode makes reads of unwritten memory NaN.
  if (job_->config.debug) std::memset(p, 0xFF, bytes);
  std::memset(p + bytes, kCanary, kCanaryBytes);
  static_entries_.push_back(StaticEntry{site, offset, bytes});
  static_used_ = offset + bytes + kCanaryBytes;
  static_counted_ = counted;
  quiet_ = false;
  return p;
}

// Checked when the block ends: a write past a static shared array changed the canary behind it.
inline std::string Runner::static_smem_overflow() const {
  for (const StaticEntry& e : static_entries_) {
    const unsigned char* c = static_arena_.get() + e.offset + e.bytes;
    for (std::size_t i = 0; i < kCanaryBytes; ++i) {
      if (c[i] != kCanary) {
        return cat("static shared memory: ", e.site->name, " (", call_site(e.site->file, e.site->line), ", ", e.bytes,
                   " bytes) was written past its end (byte ", e.bytes + i, ")");
      }
    }
  }
  return {};
}

inline bool Runner::is_shared(const void* p) const {
  const auto* b = static_cast<const unsigned char*>(p);
  if (dyn_ptr_ && b >= dyn_ptr_ && b < smem_end_) return true;
  return static_arena_ && b >= static_arena_.get() && b < static_arena_.get() + static_used_;
}

// The running thread gives way: it becomes runnable at the back of the queue, and either an
// unstarted thread starts (coin flip, or when nothing else is queued) or the queue's front runs.
inline void Runner::yield_current() {
  Slot* s = cur_;
  const bool can_start = next_unstarted_ < n_;
  if (queue_empty() && !can_start) return;  // nobody else can run now
  s->state = ThreadState::runnable;
  const bool start_new = can_start && (queue_empty() || (next_random() & 1u));
  push_back(s->linear);
  if (start_new) {
    Fiber* f = acquire_fiber();
    bind(f, take_unstarted());
    start(s->fiber, f, true);
  } else {
    Slot* next = &slots_[pop_front()];
    if (next != s) switch_to(s->fiber, next->fiber, true);
  }
  enter(s);
}

inline void Runner::setup_dynamic_smem(const LaunchJob& job) {
  if (job.smem == 0) {  // keep the mapping; the kernel sees nullptr
    dyn_ptr_ = nullptr;
    return;
  }
  if (!smem_map_) {
    const std::size_t page = page_bytes();
    const std::size_t bytes = (kMaxDynamicSmem + page - 1) / page * page;
    void* m = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    mprotect(static_cast<unsigned char*>(m) + bytes, page, PROT_NONE);
    smem_map_ = static_cast<unsigned char*>(m);
    smem_map_bytes_ = bytes + page;
    smem_end_ = smem_map_ + bytes;
  }
  // The buffer ends exactly at the guard page (sizes are rounded to 16 bytes for alignment), so
  // the first access past its end faults.
  const std::size_t rounded = (job.smem + 15) & ~std::size_t(15);
  dyn_ptr_ = smem_end_ - rounded;
  if (job.config.debug) std::memset(dyn_ptr_, 0xFF, rounded);
}

inline void Runner::fiber_loop(Fiber* self) {
  for (;;) {
    Slot* s = self->slot;
    enter(s);
    run_thread(s);
    thread_exited(s);
    for (;;) {  // find the next thing for this OS thread to do
      if (!queue_empty()) {
        Slot* next = &slots_[pop_front()];
        free_.push_back(self);
        switch_to(self, next->fiber, false);
        __builtin_unreachable();
      }
      if (next_unstarted_ < n_) {  // run it right here, no switch
        bind(self, take_unstarted());
        break;
      }
      if (done_ == n_) {
        free_.push_back(self);
        switch_to(self, &host_, false);
        __builtin_unreachable();
      }
      release_barrier_or_fail();
    }
  }
}

inline void Runner::run_thread(Slot* s) {
  bool failed = false;
  try {
    job_->invoke(job_->bound);
  } catch (const std::exception& e) {
    error_ = cat("thread ", format_index(s->tid), ": ", e.what());
    failed = true;
  } catch (...) {
    error_ = cat("thread ", format_index(s->tid), ": unknown exception");
    failed = true;
  }
  // Leave the catch handler before jumping away, so the exception is released properly.
  if (failed) abort_block();
}

inline void Runner::thread_exited(Slot* s) {
  s->state = ThreadState::done;
  ++done_;
  WarpState& w = warps_[s->warp];
  w.exited |= 1u << s->lane;
  // A warp-wide collective needs this lane's operands: the others would wait for ever (on a GPU the
  // result is undefined).
  for (int g = 0; g < w.ngroups; ++g) {
    const WarpGroup& wg = w.groups[g];
    if (!wg.collective) continue;
    std::string message = cat(wg.op, ": ", current_thread(), " (warp ", s->warp, " lane ", s->lane, ") returned while ",
                              std::popcount(wg.arrived), " lane(s) of its warp wait in it at ",
                              call_site(wg.first->wfile, wg.first->wline),
                              " (every lane of the warp must execute a .sync.aligned instruction)");
    fail(std::move(message));
  }
  // Lanes waiting in a warp intrinsic no longer wait for this one.
  for (int g = 0; g < w.ngroups;) {
    const std::uint32_t need = w.groups[g].mask & w.exists & ~w.exited;
    if ((w.groups[g].arrived & need) == need) {
      complete_group(w, s->warp, g, nullptr);  // removes group g
    } else {
      ++g;
    }
  }
}

inline void Runner::block_current(Slot* s) {
  for (;;) {
    if (!queue_empty()) {
      Slot* next = &slots_[pop_front()];
      if (next != s) switch_to(s->fiber, next->fiber, true);
      enter(s);
      return;
    }
    if (next_unstarted_ < n_) {
      Fiber* f = acquire_fiber();
      bind(f, take_unstarted());
      start(s->fiber, f, true);
      enter(s);
      return;
    }
    release_barrier_or_fail();
  }
}

inline int Runner::barrier(const char* file, int line, BarrierKind kind, bool pred) {
  Slot* s = cur_;
  s->bfile = file;
  s->bline = line;
  s->bkind = kind;
  s->bpred = pred;
  s->state = ThreadState::at_barrier;
  ++at_barrier_;
  block_current(s);
  return barrier_result_;
}

// Called when nothing is runnable and nothing is unstarted.
inline void Runner::release_barrier_or_fail() {
  if (at_barrier_ != n_ - done_) fail(deadlock_message());
  const Slot* first = nullptr;
  int k = 0, count = 0;
  for (int i = 0; i < n_; ++i) {
    Slot& s = slots_[i];
    if (s.state != ThreadState::at_barrier) continue;
    if (!first) {
      first = &s;
    } else if (s.bline != first->bline || (s.bfile != first->bfile && std::strcmp(s.bfile, first->bfile) != 0)) {
      std::string message = cat("divergent __syncthreads(): thread ", format_index(first->tid), " waits at ",
                                call_site(first->bfile, first->bline), ", thread ", format_index(s.tid), " at ",
                                call_site(s.bfile, s.bline));
      fail(std::move(message));
    }
    count += s.bpred ? 1 : 0;
    scratch_[k++] = i;
  }
  if (job_->config.strict && done_ > 0) {
    const Slot* gone = nullptr;
    for (int i = 0; i < n_ && !gone; ++i)
      if (slots_[i].state == ThreadState::done) gone = &slots_[i];
    std::string message = cat("CUDA_EMU_STRICT: ", done_, " thread(s) returned before the __syncthreads() at ",
                              call_site(first->bfile, first->bline), " (first: thread ", format_index(gone->tid), ")");
    fail(std::move(message));
  }
  switch (first->bkind) {
    case BarrierKind::plain: barrier_result_ = 0; break;
    case BarrierKind::count: barrier_result_ = count; break;
    case BarrierKind::all: barrier_result_ = count == at_barrier_ ? 1 : 0; break;
    case BarrierKind::any: barrier_result_ = count > 0 ? 1 : 0; break;
  }
  if (recording_)
    for (int warp = 0; warp * 32 < n_; ++warp) align_executions(warp);
  apply_policy(scratch_.data(), k);
  for (int j = 0; j < k; ++j) {
    slots_[scratch_[j]].state = ThreadState::runnable;
    push_back(scratch_[j]);
  }
  at_barrier_ = 0;
}

inline std::string Runner::deadlock_message() const {
  int in_warp = 0, at_bar = 0;
  std::string lanes;
  const Slot* bar = nullptr;
  for (int i = 0; i < n_; ++i) {
    const Slot& s = slots_[i];
    if (s.state == ThreadState::at_warp) {
      if (in_warp < 8) {
        lanes += cat(in_warp ? ", thread " : "thread ", format_index(s.tid), " in ", s.wop, "(mask ", hex32(s.wmask),
                     ")");
      }
      ++in_warp;
    } else if (s.state == ThreadState::at_barrier) {
      if (!bar) bar = &s;
      ++at_bar;
    }
  }
  if (in_warp > 8) lanes += ", ...";
  std::string msg = cat("deadlock: ", in_warp, " thread(s) wait in warp intrinsics (", lanes, ")");
  if (at_bar) {
    msg += cat(", ", at_bar, " at __syncthreads() (thread ", format_index(bar->tid), " at ",
               call_site(bar->bfile, bar->bline), ")");
  }
  msg += "; every lane named in a warp intrinsic's mask must reach it (full-mask shuffle in divergent code?)";
  return msg;
}

inline std::uint64_t Runner::warp_op(const char* op, std::uint32_t mask, std::uint64_t value, int src_lane,
                                     bool pred, std::uint32_t* ballot, std::uint32_t* group, const char* file,
                                     int line) {
  Slot* s = cur_;
  WarpState& w = warps_[s->warp];
  const std::uint32_t bit = 1u << s->lane;
  if (!(mask & bit)) {
    std::string message = cat(op, ": thread ", format_index(s->tid), " (warp ", s->warp, " lane ", s->lane,
                              ") is not in its own mask ", hex32(mask));
    fail(std::move(message));
  }
  // On a GPU the value read from a lane outside the mask is undefined.
  if (src_lane >= 0 && !((mask >> (src_lane & 31)) & 1u)) {
    std::string message = cat(op, ": thread ", format_index(s->tid), " (warp ", s->warp, " lane ", s->lane,
                              ") reads lane ", src_lane, ", which is not in the mask ", hex32(mask), " (at ",
                              call_site(file, line), ")");
    fail(std::move(message));
  }
  s->wfile = file;
  s->wline = line;
  const int g = find_group(w, mask, op);
  s->wop = op;
  s->wmask = mask;
  s->win = value;
  s->wsrc = src_lane;
  s->wpred = pred;
  w.groups[g].arrived |= bit;
  const std::uint32_t need = mask & w.exists & ~w.exited;
  if ((w.groups[g].arrived & need) == need) {
    complete_group(w, s->warp, g, s);  // last to arrive: compute everyone's result, carry on
  } else {
    s->state = ThreadState::at_warp;
    block_current(s);
  }
  if (ballot) *ballot = s->wballot;
  if (group) *group = s->wgroup;
  return s->wout;
}

// Lanes gather per (mask, intrinsic). Groups with overlapping masks may coexist: a lane that is in
// both masks finishes the first intrinsic and then arrives at the second (e.g. two half-warp shuffles
// followed by a full-warp one). If they wait on each other, the deadlock check reports it.
inline int Runner::find_group(WarpState& w, std::uint32_t mask, const char* op) {
  for (int g = 0; g < w.ngroups; ++g) {
    const WarpGroup& wg = w.groups[g];
    if (wg.mask != mask) continue;
    if (wg.op != op && std::strcmp(wg.op, op) != 0) {
      std::string message = cat("warp ", cur_->warp, ": ", current_thread(), " calls ", op,
                                " while other lanes of mask ", hex32(mask), " wait in ", wg.op);
      fail(std::move(message));
    }
    const Slot* first = wg.first;
    if (first->wline != cur_->wline || (first->wfile != cur_->wfile && std::strcmp(first->wfile, cur_->wfile) != 0)) {
      std::string message = cat("divergent ", op, " in warp ", cur_->warp, " (mask ", hex32(mask), "): thread ",
                                format_index(first->tid), " calls it at ", call_site(first->wfile, first->wline),
                                ", thread ", format_index(cur_->tid), " at ", call_site(cur_->wfile, cur_->wline),
                                " (sm_6x runs a warp collective only when every lane of the mask executes the same one)");
      fail(std::move(message));
    }
    return g;
  }
  w.groups[w.ngroups] = WarpGroup{mask, 0, op, cur_, nullptr};
  return w.ngroups++;
}

inline void Runner::warp_collective(const char* op, void* data, WarpCollectiveFn compute, const char* file, int line) {
  Slot* s = cur_;
  WarpState& w = warps_[s->warp];
  if (w.exists != ~0u) {
    std::string message =
        cat(op, " (", call_site(file, line), "): warp ", s->warp, " has only ", std::popcount(w.exists),
            " threads (the block's last warp is partial); a .sync.aligned instruction needs all 32");
    fail(std::move(message));
  }
  if (w.exited) {
    const int gone = std::countr_zero(w.exited);
    std::string message = cat(op, " (", call_site(file, line), "): lane ", gone, " of warp ", s->warp,
                              " has returned; every lane of the warp must execute a .sync.aligned instruction");
    fail(std::move(message));
  }
  s->wfile = file;
  s->wline = line;
  const int g = find_group(w, ~0u, op);
  WarpGroup& group = w.groups[g];
  if (!group.collective) group.collective = compute;
  s->wop = op;
  s->wmask = ~0u;
  s->wdata = data;
  s->wsrc = -1;
  s->wpred = false;
  group.arrived |= 1u << s->lane;
  if (group.arrived == ~0u) {
    complete_group(w, s->warp, g, s);  // last to arrive: compute every lane's result, carry on
  } else {
    s->state = ThreadState::at_warp;
    block_current(s);
  }
  s->wdata = nullptr;
}

inline std::string Runner::shared_span_problem(const void* p, std::size_t bytes) const {
  const auto* b = static_cast<const unsigned char*>(p);
  if (dyn_ptr_ && b >= dyn_ptr_ && b < smem_end_) {
    const std::size_t offset = std::size_t(b - dyn_ptr_);
    if (offset + bytes <= job_->smem) return {};
    return cat("bytes ", offset, " to ", offset + bytes, " of the dynamic shared memory, which has ", job_->smem,
               " bytes (launch's smem_bytes)");
  }
  if (static_arena_ && b >= static_arena_.get() && b < static_arena_.get() + static_used_) {
    const std::size_t at = std::size_t(b - static_arena_.get());
    for (const StaticEntry& e : static_entries_) {
      if (at < e.offset || at >= e.offset + e.bytes + kCanaryBytes) continue;
      if (at + bytes <= e.offset + e.bytes) return {};
      return cat("bytes ", at - e.offset, " to ", at - e.offset + bytes, " of static shared array ", e.site->name, " (",
                 call_site(e.site->file, e.site->line), "), which has ", e.bytes, " bytes");
    }
    return "padding between static shared arrays";
  }
  return "not shared memory (ldmatrix reads the .shared state space only)";
}

inline void Runner::complete_group(WarpState& w, int warp, int g, const Slot* caller) {
  const WarpGroup done = w.groups[g];
  w.groups[g] = w.groups[--w.ngroups];
  if (recording_ && done.arrived == (w.exists & ~w.exited)) align_executions(warp);
  Slot* lanes = &slots_[std::size_t(warp) * 32];
  if (done.collective) {  // a full warp (warp_collective checked it): every lane left its data
    void* data[32];
    for (int l = 0; l < 32; ++l) data[l] = lanes[l].wdata;
    done.collective(data);
  }
  std::uint32_t ballot = 0;
  for (std::uint32_t m = done.arrived; m; m &= m - 1) {
    const int l = std::countr_zero(m);
    if (lanes[l].wpred) ballot |= 1u << l;
  }
  int wake[32];
  int k = 0;
  for (std::uint32_t m = done.arrived; m; m &= m - 1) {
    const int l = std::countr_zero(m);
    Slot& t = lanes[l];
    const int src = t.wsrc;
    // A source lane outside the group (inactive, returned or nonexistent) yields the caller's own value.
    t.wout = (src >= 0 && src < 32 && ((done.arrived >> src) & 1u)) ? lanes[src].win : t.win;
    t.wballot = ballot;
    t.wgroup = done.arrived;
    if (&t != caller) {
      t.state = ThreadState::runnable;
      wake[k++] = warp * 32 + l;
    }
  }
  apply_policy(wake, k);
  for (int j = k - 1; j >= 0; --j) push_front(wake[j]);
}

}  // namespace cuda_emu::detail
