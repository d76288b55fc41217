// kernels/cpu/step_barrier.h: the barrier the fused LSTM recurrence meets at every time step.
// Each round every thread publishes the round number, meets the others, and then must see every
// thread's value for that round (what the barrier's acquire/release ordering promises); a second
// meeting keeps anyone from overwriting before all have looked. Some rounds hold one thread back
// for longer than the spin so the others take the sleeping path.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/step_barrier.h"

using define::kernels::cpu::StepBarrier;

TEST_CASE("step barrier: every round's writes are seen by all, spinning and sleeping", "[lstm][barrier]") {
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    constexpr int kRounds = 3000;
    StepBarrier barrier;
    barrier.set_team(threads);
    std::vector<int> slots(static_cast<std::size_t>(threads), -1);
    std::atomic<int> stale{0};
    std::vector<std::thread> team;
    for (int id = 0; id < threads; ++id)
      team.emplace_back([&, id] {
        for (int round = 0; round < kRounds; ++round) {
          if (round % 500 == 499 && id == round / 500 % threads)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // others outlast the spin
          slots[static_cast<std::size_t>(id)] = round;
          barrier.arrive_and_wait();
          for (const int v : slots)
            if (v != round) stale.fetch_add(1);
          barrier.arrive_and_wait();
        }
      });
    for (std::thread& t : team) t.join();
    CHECK(stale.load() == 0);
    for (const int v : slots) CHECK(v == kRounds - 1);
  }
}
