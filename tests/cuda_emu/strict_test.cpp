// The stricter emulator: each planted bug of tests/cuda_emu/kernels/strict.cu, hidden by the plain forward
// schedule, is caught by the architecture limits, the block permutation, the race schedule, the
// warp-collective checks or the static shared memory arena.
#include <cmath>
#include <string>
#include <vector>

#include "emu_test_support.hpp"
#include "kernels/strict.cuh"

using Catch::Matchers::Contains;
using cuda_emu::Schedule;
using emu_test::ConfigGuard;
using emu_test::DeviceBuffer;
using emu_test::launch_error;

namespace {

std::string site(int line) { return "strict.cu:" + std::to_string(line); }

bool warp_exchange_correct(bool with_syncwarp) {
  std::vector<float> in(32);
  for (int i = 0; i < 32; ++i) in[i] = float(i + 1);
  DeviceBuffer<float> din(in), dout(32);
  emu_test::warp_exchange(din.get(), dout.get(), with_syncwarp);
  const auto out = dout.download();
  for (int i = 0; i < 32; ++i)
    if (out[i] != in[(i + 1) % 32]) return false;
  return true;
}

bool chain_correct(int blocks) {
  DeviceBuffer<int> flags(blocks);
  emu_test::chain_blocks(flags.get(), blocks);
  const auto v = flags.download();
  for (int b = 0; b < blocks; ++b)
    if (v[b] != b + 1) return false;
  return true;
}

int global_count(int threads, bool atomic) {
  DeviceBuffer<int> counter(1);
  emu_test::count_global(counter.get(), threads, atomic);
  return counter.download()[0];
}

int shared_count(int threads, bool atomic) {
  DeviceBuffer<int> out(1);
  emu_test::count_shared(out.get(), threads, atomic);
  return out.download()[0];
}

}  // namespace

TEST_CASE("emu strict: a write past a static shared array is an error naming it", "[emu][strict][smem]") {
  DeviceBuffer<float> out(32);
  emu_test::static_smem_write(out.get(), 31);  // in bounds
  CHECK(out.download()[31] == 100.f);
  const std::string msg = launch_error([&] { emu_test::static_smem_write(out.get(), 32); });
  INFO(msg);
  CHECK_THAT(msg, Contains("static shared memory: first (strict.cu:"));
  CHECK_THAT(msg, Contains("128 bytes) was written past its end (byte 128)"));
}

TEST_CASE("emu strict: a static shared array lies at exactly the alignment nvcc promises", "[emu][strict][smem]") {
  // Its element type's (or __align__(16)'s) and no more, so an access that assumes more (a 16-byte
  // load from 16-bit words) is misaligned here as it may be on a GPU.
  DeviceBuffer<unsigned> out(6);
  emu_test::static_placement(out.get());
  CHECK(out.download() == std::vector<unsigned>{1, 2, 4, 8, 0, 0});
}

TEST_CASE("emu strict: debug mode fills static shared memory with NaN", "[emu][strict][smem]") {
  ConfigGuard g;
  cuda_emu::config().debug = true;
  std::vector<float> in(32, 1.f);
  DeviceBuffer<float> din(in), dout(32);
  emu_test::warp_exchange(din.get(), dout.get(), false);  // forward: lane l reads lane l+1's unwritten slot
  const auto out = dout.download();
  int nans = 0;
  for (float f : out) nans += std::isnan(f) ? 1 : 0;
  CHECK(nans == 31);  // lane 31 reads lane 0's slot, written already
}

TEST_CASE("emu strict: a missing __syncwarp is caught under every schedule with debug fill", "[emu][strict][warp]") {
  ConfigGuard g;
  cuda_emu::config().debug = true;
  struct Variant {
    Schedule schedule;
    std::uint64_t seed;
  };
  for (Variant v : {Variant{Schedule::forward, 0}, Variant{Schedule::reverse, 0}, Variant{Schedule::random, 3},
                    Variant{Schedule::race, 3}}) {
    CAPTURE(int(v.schedule), v.seed);
    cuda_emu::config().schedule = v.schedule;
    cuda_emu::config().seed = v.seed;
    CHECK_FALSE(warp_exchange_correct(false));
    CHECK(warp_exchange_correct(true));
  }
}

TEST_CASE("emu strict: blocks run permuted, so a race between blocks shows", "[emu][strict][schedule]") {
  ConfigGuard g;
  cuda_emu::config().threads = 1;  // one OS thread: forward runs blocks strictly in index order
  cuda_emu::config().schedule = Schedule::forward;
  CHECK(chain_correct(64));
  cuda_emu::config().schedule = Schedule::reverse;
  CHECK_FALSE(chain_correct(64));
  for (Schedule s : {Schedule::random, Schedule::race}) {
    for (std::uint64_t seed : {1u, 2u, 77u}) {
      CAPTURE(int(s), seed);
      cuda_emu::config().schedule = s;
      cuda_emu::config().seed = seed;
      CHECK_FALSE(chain_correct(64));
    }
  }
}

TEST_CASE("emu strict: the block permutation is a permutation for any grid size", "[emu][strict][schedule]") {
  for (std::uint64_t n : {1u, 2u, 3u, 5u, 64u, 65u, 1000u, 4097u}) {
    for (Schedule s : {Schedule::forward, Schedule::reverse, Schedule::random, Schedule::race}) {
      CAPTURE(n, int(s));
      std::vector<int> seen(n, 0);
      for (std::uint64_t c = 0; c < n; ++c) {
        const std::uint64_t b = cuda_emu::detail::block_for_claim(c, n, s, 12345);
        REQUIRE(b < n);
        ++seen[b];
      }
      for (std::uint64_t b = 0; b < n; ++b) REQUIRE(seen[b] == 1);
    }
  }
  // Different seeds give different orders.
  std::vector<std::uint64_t> a, b;
  for (std::uint64_t c = 0; c < 100; ++c) {
    a.push_back(cuda_emu::detail::block_for_claim(c, 100, Schedule::random, 1));
    b.push_back(cuda_emu::detail::block_for_claim(c, 100, Schedule::random, 2));
  }
  CHECK(a != b);
}

TEST_CASE("emu strict: the race schedule loses updates of a non-atomic read-modify-write", "[emu][strict][race]") {
  ConfigGuard g;
  cuda_emu::config().schedule = Schedule::forward;
  CHECK(global_count(256, false) == 256);  // the bug is invisible without switches
  CHECK(shared_count(256, false) == 256);
  cuda_emu::config().schedule = Schedule::race;
  for (std::uint64_t seed : {1u, 5u, 2026u}) {
    CAPTURE(seed);
    cuda_emu::config().seed = seed;
    CHECK(global_count(256, true) == 256);  // atomics stay exact under any interleaving
    CHECK(shared_count(256, true) == 256);
    if (emu_test::race_instrumented()) {
      CHECK(global_count(256, false) < 256);
      CHECK(shared_count(256, false) < 256);
    } else {
      WARN("kernels built without the race instrumentation (sanitizer build): only atomics checked");
    }
  }
}

TEST_CASE("emu strict: shared memory over the architecture's per-block limit fails the launch", "[emu][strict][limits]") {
  ConfigGuard g;
  DeviceBuffer<float> out(32);
  cuda_emu::config().arch = 61;
  emu_test::shared_budget(out.get(), false, 48 * 1024 - 256);  // with 256 bytes static: exactly the budget
  CHECK(out.download()[5] == 5.f);
  std::string msg = launch_error([&] { emu_test::shared_budget(out.get(), false, 48 * 1024 + 4); });
  CHECK_THAT(msg, Contains("49156 bytes of dynamic shared memory, more than the 49152 a block may use on sm_61 "
                           "without opting in"));
  // sm_61 has nothing beyond 48 KiB to opt in to; sm_75 has 64 KiB.
  CHECK(emu_test::shared_budget_optin(64 * 1024) == int(cudaErrorInvalidValue));
  cuda_emu::config().arch = 75;
  REQUIRE(emu_test::shared_budget_optin(64 * 1024) == int(cudaSuccess));
  emu_test::shared_budget(out.get(), false, 64 * 1024 - 256);
  CHECK(out.download()[7] == 7.f);
  msg = launch_error([&] { emu_test::shared_budget(out.get(), false, 64 * 1024 + 16); });
  CHECK_THAT(msg, Contains("65552 bytes of dynamic shared memory, more than the 65536 this kernel opted in to"));
  REQUIRE(emu_test::shared_budget_optin(0) == int(cudaSuccess));
  // Static shared memory counts too: 32 KiB static + 20 KiB dynamic > 48 KiB.
  cuda_emu::config().arch = 61;
  emu_test::shared_budget(out.get(), true, 16 * 1024);
  msg = launch_error([&] { emu_test::shared_budget(out.get(), true, 20 * 1024); });
  INFO(msg);
  CHECK_THAT(msg, Contains("static shared memory: s (strict.cu:"));
  CHECK_THAT(msg, Contains("brings the block to 32768 bytes of static and 20480 of dynamic shared memory, more than "
                           "the 49152 a block may use on sm_61"));
  // And a block of more than 1024 threads never launches.
  DeviceBuffer<int> counter(1);
  msg = launch_error([&] { emu_test::count_global(counter.get(), 1025, true); });
  CHECK_THAT(msg, Contains("at most 1024 threads"));
}

TEST_CASE("emu strict: a block larger than the kernel's __launch_bounds__ fails the launch", "[emu][strict][limits]") {
  DeviceBuffer<int> out(128);
  emu_test::bounded(out.get(), 64);  // at the bound: runs
  CHECK(out.download()[63] == 63);
  (void)cudaGetLastError();
  const std::string msg = launch_error([&] { emu_test::bounded(out.get(), 65); });
  INFO(msg);
  CHECK_THAT(msg, Contains("too many resources requested for launch: a block of 65 threads, more than the kernel's "
                           "__launch_bounds__(64) allows (strict.cu:"));
  // The GPU's error code, and nothing of the kernel ran (out[64] was never written).
  CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources);
  CHECK(out.download()[64] != 64);
  // The flag does not leak into the next failure: another kind of launch error keeps its own code.
  DeviceBuffer<float> shuffled(32);
  launch_error([&] { emu_test::divergent_shuffle(shuffled.get()); });
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
}

TEST_CASE("emu strict: lanes shuffling from different call sites are a divergent collective", "[emu][strict][warp]") {
  DeviceBuffer<float> out(32);
  const std::string msg = launch_error([&] { emu_test::divergent_shuffle(out.get()); });
  INFO(msg);
  CHECK_THAT(msg, Contains("divergent __shfl_xor_sync in warp 0 (mask 0xffffffff): thread (0,0,0) calls it at " +
                           site(emu_test::kShuffleLineA) + ", thread (1,0,0) at " + site(emu_test::kShuffleLineB)));
}

TEST_CASE("emu strict: a shuffle reading a lane outside its mask is an error", "[emu][strict][warp]") {
  DeviceBuffer<float> out(32);
  const std::string msg = launch_error([&] { emu_test::shuffle_outside_mask(out.get()); });
  INFO(msg);
  CHECK_THAT(msg, Contains("__shfl_sync: thread (0,0,0) (warp 0 lane 0) reads lane 20, which is not in the mask "
                           "0x0000ffff"));
}
