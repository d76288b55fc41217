// Asynchronous global-to-shared copies (kernels/cuda/async_copy.cuh over cuda_emu/emu_async_copy.hpp):
// a tile copied by a block and read by other threads after wait and barrier, zero-fill, groups that
// land only at their wait (debug mode shows the destination unwritten before it), the immediate
// copies of architectures before sm_80, the profile's global and shared sides, and the mistakes
// the emulator refuses.
#include <cmath>
#include <string>
#include <vector>

#include "emu_test_support.hpp"
#include "kernels/async_copy.cuh"

using Catch::Matchers::Contains;
using cuda_emu::Schedule;
using emu_test::AsyncBug;
using emu_test::ConfigGuard;
using emu_test::DeviceBuffer;
using emu_test::launch_error;

namespace {

std::vector<float> ramp(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.5f * float(i) + 1.0f;
  return v;
}

}  // namespace

TEST_CASE("emu cp.async: a block's tile lands by the wait, zeros past src_size, on every architecture and schedule",
          "[emu][async_copy]") {
  const int threads = 96, valid = 70;
  const std::vector<float> src = ramp(4 * threads);
  DeviceBuffer<float> dsrc(src), dout(4 * threads);
  for (int arch : {61, 75, 80, 90})
    for (Schedule schedule : {Schedule::forward, Schedule::reverse, Schedule::random, Schedule::race}) {
      CAPTURE(arch, int(schedule));
      ConfigGuard g(schedule, 11);
      cuda_emu::config().arch = arch;
      cuda_emu::config().debug = true;
      emu_test::async_tile(dsrc.get(), valid, dout.get(), threads);
      const std::vector<float> out = dout.download();
      for (int t = 0; t < threads; ++t) {
        const int from = (t + 1) % threads;  // another thread's copy
        for (int i = 0; i < 4; ++i) CHECK(out[4 * t + i] == (from < valid ? src[4 * from + i] : 0.0f));
      }
    }
}

TEST_CASE("emu cp.async: a group lands at the wait that covers it, not before", "[emu][async_copy]") {
  const std::vector<float> src = ramp(8);
  DeviceBuffer<float> dsrc(src), dout(16);
  ConfigGuard g;
  cuda_emu::config().debug = true;  // fills the destination when a copy is issued
  cuda_emu::config().arch = 80;
  emu_test::async_groups(dsrc.get(), dout.get());
  std::vector<float> out = dout.download();
  for (int i = 0; i < 4; ++i) {
    CHECK(out[i] == src[i]);        // group 1: landed by wait_group 1
    CHECK(std::isnan(out[4 + i]));  // group 2: still in flight
    CHECK(out[8 + i] == src[i]);    // after wait_group 0 both have
    CHECK(out[12 + i] == src[4 + i]);
  }
  // sm_75 has no asynchronous copy: the wrapper copies at once.
  cuda_emu::config().arch = 75;
  emu_test::async_groups(dsrc.get(), dout.get());
  out = dout.download();
  for (int i = 0; i < 8; ++i) {
    CHECK(out[i] == src[i]);
    CHECK(out[8 + i] == src[i]);
  }
}

TEST_CASE("emu cp.async: a bad destination or source fails the launch naming the call site",
          "[emu][async_copy][debug]") {
  const std::vector<float> src = ramp(4 * 33);
  DeviceBuffer<float> dsrc(src), dout(4 * 32);
  ConfigGuard g(Schedule::forward);
  cuda_emu::config().arch = 80;
  std::string e = launch_error([&] { emu_test::async_bug(AsyncBug::global_destination, dsrc.get(), dout.get()); });
  CHECK_THAT(e, Contains("cp.async.cg.shared.global (async_copy.cu:"));
  CHECK_THAT(e, Contains("destination that is not inside one shared array"));
  e = launch_error([&] { emu_test::async_bug(AsyncBug::misaligned_source, dsrc.get(), dout.get()); });
  CHECK_THAT(e, Contains("source that is not aligned to its 16 bytes"));
  e = launch_error([&] { emu_test::async_bug(AsyncBug::shared_source, dsrc.get(), dout.get()); });
  CHECK_THAT(e, Contains("source in shared memory"));
}

// The sanitizer builds compile the kernels without the access instrumentation the profile records.
#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("emu cp.async: the profile sees a warp's copies as one global read and one shared write",
          "[emu][async_copy][profile]") {
  const std::vector<float> src = ramp(4 * 32);
  DeviceBuffer<float> dsrc(src), dout(4 * 32);
  ConfigGuard g;
  cuda_emu::config().arch = 80;
  cuda_emu::profile_start();
  emu_test::async_tile(dsrc.get(), 32, dout.get(), 32);
  const std::vector<cuda_emu::KernelProfile> p = cuda_emu::profile_stop();
  REQUIRE(p.size() == 1);
  // The copies' 512 bytes in 16 sectors, and the 128-byte result store.
  CHECK(p[0].global_load.requests == 1);
  CHECK(p[0].global_load.bytes == 512);
  CHECK(p[0].global_load.efficiency(false) == Approx(1.0));
  CHECK(p[0].shared_store.requests == 1);
  CHECK(p[0].shared_store.bytes == 512);
  CHECK(p[0].shared_store.sectors == p[0].shared_store.ideal);  // 16-byte lanes: no bank conflict
}

// A thread does not wait for its copies until its wait: the copies a loop issues before one wait are
// all in flight (the latency limit of the performance model), where a loop of plain loads has one.
TEST_CASE("emu cp.async: the profile counts the copies issued before a wait as in flight together",
          "[emu][async_copy][profile]") {
  const int rows = 6;
  const std::vector<float> src = ramp(128 * rows);
  DeviceBuffer<float> dsrc(src), dout(32);
  struct Case {
    int arch;
    bool wait_each;
    double in_flight;
  };
  for (const Case& c : {Case{80, false, 6.0}, Case{90, false, 6.0}, Case{80, true, 1.0}, Case{75, false, 1.0}}) {
    CAPTURE(c.arch, c.wait_each);
    ConfigGuard g;
    cuda_emu::config().arch = c.arch;
    cuda_emu::profile_start();
    emu_test::async_rows(dsrc.get(), rows, c.wait_each, dout.get());
    const std::vector<cuda_emu::KernelProfile> p = cuda_emu::profile_stop();
    REQUIRE(p.size() == 1);
    CHECK(p[0].loads_in_flight == c.in_flight);
    CHECK(p[0].global_load.requests == rows);  // one 512-byte request a row, on every architecture
    const std::vector<float> out = dout.download();
    for (int t = 0; t < 32; ++t) {
      float sum = 0.0f;
      for (int r = 0; r < rows; ++r) sum += src[128 * r + 4 * t];
      CHECK(out[t] == sum);
    }
  }
}
#endif
