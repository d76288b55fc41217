// Emulator-specific behaviour: configuration, launch checks, the block pool (threads, fork, several
// host threads), dynamic shared memory placement, fiber stacks, warp-intrinsic misuse. The kernels
// here are emulator-only (plain C++ functions using the emulator's built-ins), defined inline.
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "emu_test_support.hpp"

using Catch::Matchers::Contains;
using cuda_emu::Schedule;
using emu_test::ConfigGuard;
using emu_test::DeviceBuffer;
using emu_test::launch_error;

namespace {

void fill_kernel(int* out, int value) { out[blockIdx.x * blockDim.x + threadIdx.x] = value + int(threadIdx.x); }

void nested_launch_kernel(int* out) {
  __syncthreads();
  launch(fill_kernel, 1, 1, 0, nullptr, out, 1);
}

void smem_probe_kernel(std::uintptr_t* out) {
  EMU_DYNAMIC_SHARED(unsigned char, s);
  if (threadIdx.x == 0) out[blockIdx.x] = reinterpret_cast<std::uintptr_t>(s);
}

void os_thread_kernel(std::thread::id* ids) {
  if (threadIdx.x == 0) {
    ids[blockIdx.x] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void by_value_kernel(int v, int* out) {
  out[threadIdx.x] = v;
  v += 1000;  // each thread has its own copy of the parameters
  __syncthreads();
  out[threadIdx.x] += v - 1000;
}

void big_stack_kernel(int* out) {
  volatile char buf[100 * 1024];
  for (std::size_t i = 0; i < sizeof buf; i += 512) buf[i] = char(i);
  __syncthreads();
  int s = 0;
  for (std::size_t i = 0; i < sizeof buf; i += 512) s += buf[i];
  out[threadIdx.x] = s;
}

void overlapping_masks_kernel(int* out) {
  const unsigned lane = threadIdx.x % 32;
  // Each half names one lane of the other half, which waits in its own shuffle: a cycle.
  const unsigned mask = lane < 16 ? 0x0001ffffu : 0xffff0001u;
  out[threadIdx.x] = __shfl_sync(mask, int(lane), 0);
}

void mixed_intrinsics_kernel(int* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane < 16) {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, int(lane), 0);
  } else {
    out[threadIdx.x] = int(__ballot_sync(0xffffffffu, 1));
  }
}

void bad_width_kernel(int* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1, 12); }

void exits_early_kernel(int* out) {
  // Lanes 16-31 return; the shuffle of lanes 0-15 with the full mask must not wait for them.
  const int lane = int(threadIdx.x % 32);
  if (lane >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, lane, 1);
}

}  // namespace

TEST_CASE("emu: configuration from the environment", "[emu][config]") {
  Schedule s = Schedule::forward;
  std::uint64_t seed = 0;
  CHECK(cuda_emu::parse_schedule("reverse", s, seed));
  CHECK(s == Schedule::reverse);
  CHECK(cuda_emu::parse_schedule("random:42", s, seed));
  CHECK(s == Schedule::random);
  CHECK(seed == 42);
  CHECK(cuda_emu::parse_schedule("forward", s, seed));
  CHECK(s == Schedule::forward);
  CHECK_FALSE(cuda_emu::parse_schedule("sideways", s, seed));

  setenv("CUDA_EMU_SCHEDULE", "random:7", 1);
  setenv("CUDA_EMU_DEBUG", "1", 1);
  setenv("CUDA_EMU_STRICT", "1", 1);
  setenv("CUDA_EMU_THREADS", "3", 1);
  setenv("CUDA_EMU_STACK_KB", "128", 1);
  const cuda_emu::Config c = cuda_emu::config_from_env();
  unsetenv("CUDA_EMU_SCHEDULE");
  unsetenv("CUDA_EMU_DEBUG");
  unsetenv("CUDA_EMU_STRICT");
  unsetenv("CUDA_EMU_THREADS");
  unsetenv("CUDA_EMU_STACK_KB");
  CHECK(c.schedule == Schedule::random);
  CHECK(c.seed == 7);
  CHECK(c.debug);
  CHECK(c.strict);
  CHECK(c.threads == 3);
  CHECK(c.stack_kb == 128);
  const cuda_emu::Config d = cuda_emu::config_from_env();
  CHECK(d.schedule == Schedule::forward);
  CHECK_FALSE(d.debug);
  CHECK(d.threads >= 1);
}

TEST_CASE("emu: invalid launch configurations are rejected", "[emu][launch]") {
  DeviceBuffer<int> out(64);
  (void)cudaGetLastError();
  auto expect_invalid = [&](dim3 grid, dim3 block, std::size_t smem, const char* what) {
    try {
      launch(fill_kernel, grid, block, smem, nullptr, out.get(), 0);
      FAIL("launch accepted " << what);
    } catch (const cuda_emu::kernel_error& e) {
      CHECK(e.block_linear == -1);
      CHECK_THAT(std::string(e.what()), Contains("invalid configuration"));
    }
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  };
  expect_invalid(dim3(1), dim3(2048), 0, "2048 threads");
  expect_invalid(dim3(1), dim3(1, 1, 65), 0, "z = 65");
  expect_invalid(dim3(0), dim3(32), 0, "an empty grid");
  expect_invalid(dim3(1, 70000), dim3(32), 0, "grid y = 70000");
  expect_invalid(dim3(1), dim3(32), 300 * 1024, "300 KiB of shared memory");
  launch(fill_kernel, dim3(2), dim3(32), 0, nullptr, out.get(), 5);
  CHECK(out.download()[33] == 6);
}

TEST_CASE("emu: a launch inside a kernel is an error", "[emu][launch]") {
  DeviceBuffer<int> out(32);
  const std::string msg = launch_error([&] { launch(nested_launch_kernel, 1, 32, 0, nullptr, out.get()); });
  CHECK_THAT(msg, Contains("dynamic parallelism"));
  CHECK_THROWS_AS(__syncthreads(), std::logic_error);  // device functions outside a kernel
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
}

TEST_CASE("emu: kernel parameters are copied per thread", "[emu][launch]") {
  DeviceBuffer<int> out(64);
  launch(by_value_kernel, 1, 64, 0, nullptr, 7, out.get());
  for (int v : out.download()) REQUIRE(v == 14);
}

TEST_CASE("emu: dynamic shared memory ends at the guard page", "[emu][smem]") {
  DeviceBuffer<std::uintptr_t> ptrs(4);
  launch(smem_probe_kernel, 4, 32, 1000, nullptr, ptrs.get());
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  for (std::uintptr_t p : ptrs.download()) {
    CHECK(p % 16 == 0);
    CHECK((p + 1008) % page == 0);  // 1000 bytes rounded up to 16 end exactly at a page boundary
  }
  launch(smem_probe_kernel, 2, 32, 0, nullptr, ptrs.get());
  CHECK(ptrs.download()[0] == 0);  // no dynamic shared memory: nullptr
  launch(smem_probe_kernel, 1, 32, 64, nullptr, ptrs.get());
  CHECK((ptrs.download()[0] + 64) % page == 0);  // and the mapping survived the 0-byte launch
}

TEST_CASE("emu: blocks run in parallel on the configured number of OS threads", "[emu][pool]") {
  constexpr int blocks = 24;
  DeviceBuffer<std::thread::id> ids(blocks);
  auto distinct = [&] {
    launch(os_thread_kernel, blocks, 32, 0, nullptr, ids.get());
    const auto v = ids.download();
    return std::set<std::thread::id>(v.begin(), v.end()).size();
  };
  ConfigGuard g;
  cuda_emu::config().threads = 1;
  CHECK(distinct() == 1);
  cuda_emu::config().threads = 2;
  CHECK(distinct() == 2);
  cuda_emu::config().threads = 3;
  CHECK(distinct() >= 2);
}

TEST_CASE("emu: a fork()ed child runs launches on its own thread", "[emu][pool]") {
  ConfigGuard g;
  cuda_emu::config().threads = 2;
  DeviceBuffer<int> warm(256);
  launch(fill_kernel, 8, 32, 0, nullptr, warm.get(), 0);  // make sure the parent's workers exist
  const int status = emu_test::run_in_child([] {
    DeviceBuffer<int> out(64 * 128);
    launch(fill_kernel, 64, 128, 0, nullptr, out.get(), 3);
    const auto v = out.download();
    for (int i = 0; i < 64 * 128; ++i)
      if (v[i] != 3 + i % 128) _exit(2);
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  launch(fill_kernel, 8, 32, 0, nullptr, warm.get(), 1);  // the parent's pool still works
  CHECK(warm.download()[255] == 32);
}

TEST_CASE("emu: several host threads may launch concurrently", "[emu][pool]") {
  std::atomic<int> wrong{0};
  std::vector<std::thread> hosts;
  for (int h = 0; h < 4; ++h) {
    hosts.emplace_back([h, &wrong] {
      int* d = nullptr;
      cudaMalloc(&d, 16 * 64 * sizeof(int));
      std::vector<int> v(16 * 64);
      for (int rep = 0; rep < 10; ++rep) {
        launch(fill_kernel, 16, 64, 0, nullptr, d, h * 100 + rep);
        cudaMemcpy(v.data(), d, v.size() * sizeof(int), cudaMemcpyDeviceToHost);
        for (int i = 0; i < 16 * 64; ++i)
          if (v[i] != h * 100 + rep + i % 64) ++wrong;
      }
      cudaFree(d);
    });
  }
  for (auto& t : hosts) t.join();
  CHECK(wrong == 0);
}

TEST_CASE("emu: fiber stack size is configurable", "[emu][stack]") {
  ConfigGuard g;
  cuda_emu::config().stack_kb = 512;
  DeviceBuffer<int> out(64);
  launch(big_stack_kernel, 2, 64, 0, nullptr, out.get());
  int want = 0;
  for (std::size_t i = 0; i < 100 * 1024; i += 512) want += char(i);
  for (int v : out.download()) CHECK(v == want);
  if (!emu_test::kSanitized) {  // a 100 KiB frame overflows a 64 KiB stack into its guard page
    cuda_emu::config().stack_kb = 64;
    const int status = emu_test::run_in_child([&] { launch(big_stack_kernel, 1, 32, 0, nullptr, out.get()); });
    CHECK(emu_test::died_of_fault(status));
  }
}

TEST_CASE("emu: misuse of warp intrinsics is reported", "[emu][warp]") {
  DeviceBuffer<int> out(64);
  CHECK_THAT(launch_error([&] { launch(overlapping_masks_kernel, 1, 32, 0, nullptr, out.get()); }),
             Contains("deadlock: 32 thread(s) wait in warp intrinsics"));
  CHECK_THAT(launch_error([&] { launch(mixed_intrinsics_kernel, 1, 32, 0, nullptr, out.get()); }),
             Contains("while other lanes of mask 0xffffffff wait in"));
  CHECK_THAT(launch_error([&] { launch(bad_width_kernel, 1, 32, 0, nullptr, out.get()); }),
             Contains("width 12 is not a power of two"));
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  // Lanes that returned are not waited for.
  launch(exits_early_kernel, 1, 64, 0, nullptr, out.get());
  const auto v = out.download();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    if (lane < 16) CHECK(v[t] == (lane + 1 < 16 ? lane + 1 : lane));
  }
}

TEST_CASE("emu: AddressSanitizer sees global-memory overflows inside kernels", "[emu][asan]") {
  if (!emu_test::kSanitized) {
    SUCCEED("not an AddressSanitizer build");
    return;
  }
  const int status = emu_test::run_in_child([] {
    if (!freopen("/dev/null", "w", stderr)) return;  // the expected report would only clutter the log
    int* d = nullptr;
    cudaMalloc(&d, 32 * sizeof(int));
    launch(fill_kernel, 1, 33, 0, nullptr, d, 0);  // thread 32 writes d[32]
  });
  CHECK((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0)));
}
