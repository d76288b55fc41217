// CUDA execution emulator, part 4 of 6: the block pool and launch(). Blocks of a launch are claimed
// through an atomic counter by the calling thread plus up to config().threads - 1 persistent worker
// threads, each with its own Runner. Launches are synchronous and serialised (several host threads
// may launch; they take turns).
//
// fork(): a child process has none of the parent's worker threads, so the pool notices the changed
// pid and runs the child's launches on the calling thread alone, never touching (or joining) the
// parent's workers. The pool is deliberately leaked: workers sleep in it until the process exits,
// and no static destructor has to stop them.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <map>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_runner.hpp"
#include "cuda_emu/emu_stream.hpp"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu::detail {

inline Runner& this_thread_runner() {
  thread_local std::unique_ptr<Runner> runner;
  if (!runner) runner = std::make_unique<Runner>();
  return *runner;
}

// Blocks of a grid may run in any order on a GPU, so the schedule that reorders threads reorders
// blocks too: which block the claim-th claim of a launch runs. forward: index order; reverse:
// backwards; random and race: a seeded permutation computed without a table (grids reach 2^63
// blocks): a bijection on [0, 2^k) made of odd multiplications and xor-shifts, restricted to
// [0, n) by cycle walking (apply it again until the value is below n; fewer than 2 steps on average).
inline std::uint64_t block_for_claim(std::uint64_t claim, std::uint64_t n, Schedule schedule, std::uint64_t seed) {
  if (schedule == Schedule::forward || n < 2) return claim;
  if (schedule == Schedule::reverse) return n - 1 - claim;
  const int bits = std::bit_width(n - 1);
  const std::uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  std::uint64_t keys[3];
  std::uint64_t z = seed;
  for (std::uint64_t& k : keys) {  // splitmix64 of the seed
    z += 0x9e3779b97f4a7c15ull;
    std::uint64_t m = z;
    m = (m ^ (m >> 30)) * 0xbf58476d1ce4e5b9ull;
    m = (m ^ (m >> 27)) * 0x94d049bb133111ebull;
    k = m ^ (m >> 31);
  }
  const int shift = bits / 2 + 1;
  std::uint64_t x = claim;
  do {
    for (const std::uint64_t k : keys) {
      x = (x * (k | 1u) + (k >> 17)) & mask;  // odd multiplier: a bijection modulo 2^bits
      x ^= x >> shift;                        // so is a right xor-shift within `bits` bits
    }
  } while (x >= n);
  return x;
}

// Dynamic shared memory opt-ins (cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)) by kernel, as the CUDA runtime keeps them.
class SmemOptins {
 public:
  static SmemOptins& instance() {
    static SmemOptins* table = new SmemOptins();  // leaked: launches may run during static destruction
    return *table;
  }
  void set(const void* kernel, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[kernel] = bytes;
  }
  // 0 when the kernel has not opted in.
  std::size_t get(const void* kernel) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bytes_.find(kernel);
    return it == bytes_.end() ? 0 : it->second;
  }

 private:
  std::mutex mu_;
  std::map<const void*, std::size_t> bytes_;
};

class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool();  // leaked on purpose, see above
    return *pool;
  }

  struct Failure {
    bool failed = false;
    uint3 block{0, 0, 0};
    long long linear = -1;
    std::string message;
    cudaError_t code = cudaErrorLaunchFailure;  // what cudaGetLastError reports for it
  };

  // Called by a block larger than its kernel's __launch_bounds__ (EMU_CHECK_LAUNCH_BOUNDS in
  // emu_device.hpp): the launch then fails as a GPU's does, with cudaErrorLaunchOutOfResources.
  void launch_bounds_exceeded() { bounds_exceeded_.store(true, std::memory_order_relaxed); }

  void run(const LaunchJob& job, Failure& failure) {
    const std::uint64_t nblocks = std::uint64_t(job.grid.x) * job.grid.y * job.grid.z;
    if (getpid() != pid_) {  // forked child: single-threaded, the parent's workers do not exist here
      setup(job, nblocks, failure);
      work();
      finish(failure);
      return;
    }
    std::lock_guard<std::mutex> serial(launch_mutex_);
    setup(job, nblocks, failure);
    const unsigned threads = job.config.threads ? job.config.threads : 1u;
    const unsigned helpers = unsigned(std::min<std::uint64_t>(threads, nblocks)) - 1u;
    if (helpers > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      while (workers_.size() < helpers) {
        const unsigned index = unsigned(workers_.size());
        workers_.emplace_back([this, index] { worker(index); });
      }
      wanted_ = helpers;
      active_ = helpers;
      ++generation_;
    }
    if (helpers > 0) wake_.notify_all();
    work();
    if (helpers > 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return active_ == 0; });
    }
    finish(failure);
  }

 private:
  Pool() : pid_(getpid()) {}

  void setup(const LaunchJob& job, std::uint64_t nblocks, Failure& failure) {
    job_ = &job;
    nblocks_ = nblocks;
    failure_ = &failure;
    next_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    bounds_exceeded_.store(false, std::memory_order_relaxed);
  }

  // A failed launch's error code: out of resources when a block exceeded its kernel's bound.
  void finish(Failure& failure) {
    if (failure.failed && bounds_exceeded_.load(std::memory_order_relaxed))
      failure.code = cudaErrorLaunchOutOfResources;
  }

  // Claims and runs blocks until none are left or one failed.
  void work() {
    Runner& runner = this_thread_runner();
    std::string error;
    for (;;) {
      if (failed_.load(std::memory_order_relaxed)) return;
      const std::uint64_t claim = next_.fetch_add(1, std::memory_order_relaxed);
      if (claim >= nblocks_) return;
      const std::uint64_t b = block_for_claim(claim, nblocks_, job_->config.schedule, job_->config.seed);
      const std::uint64_t gx = job_->grid.x, gy = job_->grid.y;
      const uint3 index{unsigned(b % gx), unsigned(b / gx % gy), unsigned(b / (gx * gy))};
      bool ok = false;
      try {
        ok = runner.run_block(*job_, index, b, error);
      } catch (const std::exception& e) {  // e.g. no memory for a fiber stack
        error = e.what();
      }
      if (!ok) {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        if (!failure_->failed) {
          failure_->failed = true;
          failure_->block = index;
          failure_->linear = (long long)b;
          failure_->message = error;
        }
        failed_.store(true, std::memory_order_relaxed);
        return;
      }
    }
  }

  void worker(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= wanted_) continue;  // not needed for this launch
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_all();
    }
  }

  const pid_t pid_;
  std::mutex launch_mutex_;  // one launch at a time
  std::mutex mutex_;         // guards the fields below and wakes workers
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::uint64_t generation_ = 0;
  unsigned wanted_ = 0, active_ = 0;

  const LaunchJob* job_ = nullptr;
  std::uint64_t nblocks_ = 0;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> bounds_exceeded_{false};
  std::mutex failure_mutex_;
  Failure* failure_ = nullptr;
};

// Checks the launch configuration against CUDA's limits for the configured architecture and sets
// the block's shared-memory budget (static + dynamic) in the job; returns an error message or "".
inline std::string check_launch(LaunchJob& job) {
  const dim3 grid = job.grid, block = job.block;
  const std::size_t smem = job.smem;
  const auto dims = [](dim3 d) { return format_index(uint3(d)); };
  const std::uint64_t threads = std::uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return cat("invalid configuration: empty grid ", dims(grid));
  if (block.x == 0 || block.y == 0 || block.z == 0) return cat("invalid configuration: empty block ", dims(block));
  if (threads > std::uint64_t(kMaxBlockThreads) || block.x > 1024 || block.y > 1024 || block.z > 64)
    return cat("invalid configuration: block ", dims(block), " (at most 1024 threads, z at most 64)");
  if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    return cat("invalid configuration: grid ", dims(grid), " (y and z at most 65535)");
  ArchLimits arch;
  arch_limits(job.config.arch, arch);
  const std::size_t optin = SmemOptins::instance().get(job.kernel);
  const std::size_t dynamic_limit = optin ? optin : arch.smem_default;
  if (smem > dynamic_limit && optin) {
    return cat("invalid configuration: ", smem, " bytes of dynamic shared memory, more than the ", optin,
               " this kernel opted in to");
  }
  if (smem > dynamic_limit) {
    return cat("invalid configuration: ", smem, " bytes of dynamic shared memory, more than the ", dynamic_limit,
               " a block may use on sm_", job.config.arch, " without opting in (cudaFuncSetAttribute(kernel, ",
               "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))");
  }
  job.smem_block_limit = optin ? arch.smem_optin : arch.smem_default;
  return {};
}

// The first kernel argument that points into another device's memory, as an error message, or "".
// Pointers inside structures are not seen; the kernels pass their tensors as plain pointers.
template <typename Tuple>
std::string foreign_pointer_argument(const Tuple& params) {
  const int device = current_device();
  std::string out;
  std::size_t i = 0;
  const auto check = [&](const auto& p) {
    using T = std::decay_t<decltype(p)>;
    if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>) {
      const int owner = owner_of(p);
      if (out.empty() && owner >= 0 && owner != device)
        out = cat("kernel argument ", i, " points into the memory of device ", owner, " but the kernel runs on device ",
                  device, " (a GPU would fault: make the tensors' device current first)");
    }
    ++i;
  };
  std::apply([&](const auto&... p) { (check(p), ...); }, params);
  return out;
}

// Launches run so far in this process (all devices), for tests that count an op's kernels.
inline std::atomic<std::uint64_t>& launch_counter() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

inline void run_launch(LaunchJob& job) {
  if (tls_runner) {
    throw std::logic_error("launch() inside a kernel: dynamic parallelism is not supported by the emulator");
  }
  job.config = config();
  if (std::string bad = check_launch(job); !bad.empty()) {
    set_last_error(cudaErrorInvalidConfiguration);
    throw kernel_error(bad, uint3{0, 0, 0}, -1);
  }
  launch_counter().fetch_add(1, std::memory_order_relaxed);
  // Profiling (emu_profile.hpp): blocks one at a time in index order on this thread, an evenly
  // spaced sample of at most settings.max_blocks of them recorded (every record_stride-th).
  Profiler& prof = profiler();
  std::unique_lock<std::mutex> profiling(prof.mu);
  LaunchRecorder recorder;
  if (prof.on) {
    const std::uint64_t nblocks = std::uint64_t(job.grid.x) * job.grid.y * job.grid.z;
    const std::uint64_t cap = std::max<std::uint64_t>(1, prof.settings.max_blocks);
    job.record_stride = (nblocks + cap - 1) / cap;
    // An odd stride: grids are mostly powers of two in size, and a power-of-two stride would record
    // blocks that all sit at one phase of a power-of-two period (a row kernel's rows, every one the
    // first few queries of a causal head).
    if (job.record_stride > 1 && job.record_stride % 2 == 0) ++job.record_stride;
    job.recorder = &recorder;
    job.config.threads = 1;
    job.config.schedule = Schedule::forward;
    recorder.block_weight = double(nblocks) / double((nblocks + job.record_stride - 1) / job.record_stride);
    recorder.profile.kernel = kernel_name(job.kernel);
    recorder.profile.function = job.kernel;
    recorder.profile.grid = job.grid;
    recorder.profile.block = job.block;
    recorder.profile.dynamic_smem = job.smem;
    recorder.profile.blocks = nblocks;
  } else {
    profiling.unlock();
  }
  Pool::Failure failure;
  Pool::instance().run(job, failure);
  if (job.recorder) {
    recorder.finish();
    prof.launches.push_back(std::move(recorder.profile));
  }
  if (failure.failed) {
    set_last_error(failure.code);
    throw kernel_error(failure.message, failure.block, failure.linear);
  }
}

}  // namespace cuda_emu::detail

// launch(kernel, grid, block, dynamic_smem_bytes, stream, args...): the emulator's `<<<>>>`.
// Same signature as the nvcc adapter in cuda_compat.cuh. Arguments are converted to the kernel's
// parameter types once; every CUDA thread receives its own copy, as with real kernel parameters.
// Runs synchronously, after the work queued before it on `stream` (emu_stream.hpp); throws
// cuda_emu::kernel_error if a block fails or the configuration is invalid.
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch(): wrong number of kernel arguments");
  struct Bound {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> params;
  };
  const Bound bound{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
  if (std::string foreign = cuda_emu::detail::foreign_pointer_argument(bound.params); !foreign.empty()) {
    cuda_emu::detail::set_last_error(cudaErrorIllegalAddress);
    throw cuda_emu::kernel_error(foreign, uint3{0, 0, 0}, -1);
  }
  if constexpr (!cuda_emu::detail::kRaceHooks) {
    if (cuda_emu::config().schedule == cuda_emu::Schedule::race) {
      static bool said = false;  // once per kernel is enough
      if (!said) {
        said = true;
        std::fprintf(stderr, "cuda_emu: this build's kernels have no race instrumentation (sanitizer build): the race "
                             "schedule switches threads only at barriers\n");
      }
    }
  }
  cuda_emu::detail::LaunchJob job;
  job.invoke = [](const void* b) {
    const Bound& self = *static_cast<const Bound*>(b);
    std::apply(self.kernel, self.params);
  };
  job.bound = &bound;
  job.kernel = reinterpret_cast<const void*>(kernel);
  job.grid = grid;
  job.block = block;
  job.smem = smem_bytes;
  cuda_emu::detail::before_synchronous_op(stream);
  if (cuda_emu::config().dry_run) return;
  cuda_emu::detail::run_launch(job);
}
