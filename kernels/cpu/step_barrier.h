// A barrier for an OpenMP team that meets many times in quick succession (the fused LSTM
// recurrence: one meeting per time step, every few microseconds).
//
// Why not `#pragma omp barrier`: define runs with OMP_WAIT_POLICY=PASSIVE (core/omp_wait.h),
// under which libgomp's barrier puts a waiting thread to sleep in the kernel at once, and waking
// it costs about as much as a whole step of a small recurrence (B = 20, H = 200: ~10 us of work per
// thread). This barrier first spins for a bounded time, which covers the usual wait between two
// threads that run the same amount of work, and only then sleeps (C++20 atomic wait, a futex on
// Linux), so a team that lost its core to another process does not burn it spinning.
//
// Sense by generation: a thread reads the generation, arrives; the last arrival resets the count
// and advances the generation, releasing the others. Acquire/release ordering makes everything
// written before the barrier visible after it, as the OpenMP barrier does.
#pragma once

#include <atomic>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace define::kernels::cpu {

class StepBarrier {
 public:
  StepBarrier() = default;
  StepBarrier(const StepBarrier&) = delete;
  StepBarrier& operator=(const StepBarrier&) = delete;

  // The team size; set once by one thread before anyone arrives (e.g. in `omp single`, whose
  // implicit barrier publishes it).
  void set_team(int threads) { threads_ = threads; }

  void arrive_and_wait() {
    if (threads_ <= 1) return;
    const unsigned generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      generation_.notify_all();
      return;
    }
    // Spin for up to kSpin, checking the clock only every kChecks rounds.
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (;;) {
      for (int i = 0; i < kChecks; ++i) {
        if (generation_.load(std::memory_order_acquire) != generation) return;
        relax();
      }
      if (std::chrono::steady_clock::now() > until) break;
    }
    while (generation_.load(std::memory_order_acquire) == generation)
      generation_.wait(generation, std::memory_order_acquire);
  }

 private:
  static constexpr auto kSpin = std::chrono::microseconds(200);
  static constexpr int kChecks = 64;

  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }

  int threads_ = 1;
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

}  // namespace define::kernels::cpu
