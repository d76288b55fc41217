// The emulator's debug aids, each shown to catch a planted bug (tests/cuda_emu/kernels/buggy.cu), and
// correct kernels shown to give bit-identical results under every thread schedule.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "emu_test_support.hpp"
#include "kernels/buggy.cuh"
#include "kernels/gemm.cuh"
#include "kernels/reduce.cuh"

using Catch::Matchers::Contains;
using cuda_emu::Schedule;
using emu_test::ConfigGuard;
using emu_test::DeviceBuffer;
using emu_test::launch_error;

namespace {

// Runs the neighbour-copy kernel and reports whether its output is right.
bool neighbour_copy_correct(bool with_barrier) {
  constexpr int blocks = 8, block = emu_test::kBuggyBlock;
  std::vector<float> in(blocks * block);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(i + 1);
  DeviceBuffer<float> din(in), dout(in.size());
  emu_test::neighbour_copy(din.get(), dout.get(), blocks, with_barrier);
  const auto out = dout.download();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t src = i % block == 0 ? i : i - 1;
    if (out[i] != in[src]) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("emu debug: a missing __syncthreads passes forward but fails reverse and random", "[emu][debug][schedule]") {
  {
    ConfigGuard g(Schedule::forward);
    CHECK(neighbour_copy_correct(false));
    CHECK(neighbour_copy_correct(true));
  }
  {
    ConfigGuard g(Schedule::reverse);
    CHECK_FALSE(neighbour_copy_correct(false));
    CHECK(neighbour_copy_correct(true));
  }
  for (std::uint64_t seed : {1u, 2u, 12345u}) {
    CAPTURE(seed);
    ConfigGuard g(Schedule::random, seed);
    CHECK_FALSE(neighbour_copy_correct(false));
    CHECK(neighbour_copy_correct(true));
  }
}

TEST_CASE("emu debug: correct kernels are bit-identical under every schedule", "[emu][debug][schedule]") {
  const int m = 67, n = 45, k = 93;
  const auto a = emu_test::random_floats(std::size_t(m) * k, 21), b = emu_test::random_floats(std::size_t(k) * n, 22);
  const std::size_t rn = 100003;
  const auto x = emu_test::random_floats(rn, 23);
  const int rows = 4, cols = 333;
  const auto sx = emu_test::random_floats(std::size_t(rows) * cols, 24);

  auto run_all = [&] {
    DeviceBuffer<float> da(a), db(b), dc(std::size_t(m) * n), dc2(std::size_t(m) * n);
    emu_test::sgemm_tiled(m, n, k, da.get(), db.get(), dc.get());
    emu_test::sgemm_dynamic_smem(m, n, k, da.get(), db.get(), dc2.get());
    DeviceBuffer<float> dx(x), partial(emu_test::kReduceMaxBlocks), sum(1);
    emu_test::reduce_sum(dx.get(), rn, partial.get(), sum.get());
    DeviceBuffer<float> dsx(sx), dsy(sx.size());
    emu_test::softmax_rows(dsx.get(), dsy.get(), rows, cols);
    std::vector<float> all = dc.download();
    for (auto part : {dc2.download(), sum.download(), dsy.download()}) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  std::vector<float> reference;
  {
    ConfigGuard g(Schedule::forward);
    reference = run_all();
  }
  struct Variant {
    Schedule schedule;
    std::uint64_t seed;
  };
  for (Variant v : {Variant{Schedule::reverse, 0}, Variant{Schedule::random, 1}, Variant{Schedule::random, 99},
                    Variant{Schedule::race, 1}, Variant{Schedule::race, 99}}) {
    CAPTURE(int(v.schedule), v.seed);
    ConfigGuard g(v.schedule, v.seed);
    const auto got = run_all();
    REQUIRE(got.size() == reference.size());
    CHECK(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("emu debug: divergent barrier reports both call sites", "[emu][debug]") {
  DeviceBuffer<int> out(32);
  (void)cudaGetLastError();
  const std::string msg = launch_error([&] { emu_test::divergent_barrier(out.get()); });
  INFO(msg);
  CHECK_THAT(msg, Contains("divergent __syncthreads()"));
  CHECK_THAT(msg, Contains("thread (0,0,0) waits at buggy.cu:" + std::to_string(emu_test::kDivergentLineA)));
  CHECK_THAT(msg, Contains("thread (16,0,0) at buggy.cu:" + std::to_string(emu_test::kDivergentLineB)));
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
}

TEST_CASE("emu debug: full-mask shuffle in divergent code is a deadlock naming the threads", "[emu][debug][warp]") {
  DeviceBuffer<float> out(32);
  const std::string msg = launch_error([&] { emu_test::warp_deadlock(out.get()); });
  INFO(msg);
  CHECK_THAT(msg, Contains("deadlock: 16 thread(s) wait in warp intrinsics"));
  CHECK_THAT(msg, Contains("thread (0,0,0) in __shfl_down_sync(mask 0xffffffff)"));
  CHECK_THAT(msg, Contains("16 at __syncthreads()"));
  CHECK_THAT(msg, Contains("thread (16,0,0) at buggy.cu:"));
  ConfigGuard g(Schedule::reverse);  // same verdict in another order
  CHECK_THAT(launch_error([&] { emu_test::warp_deadlock(out.get()); }), Contains("deadlock: 16 thread(s)"));
}

TEST_CASE("emu debug: a lane outside its own mask is an error", "[emu][debug][warp]") {
  DeviceBuffer<float> out(32);
  {
    ConfigGuard g(Schedule::forward);  // lane 16 is the first offender in forward order
    const std::string msg = launch_error([&] { emu_test::wrong_mask(out.get()); });
    INFO(msg);
    CHECK_THAT(msg, Contains("__shfl_sync: thread (16,0,0) (warp 0 lane 16) is not in its own mask 0x0000ffff"));
  }
  ConfigGuard g(Schedule::reverse);
  CHECK_THAT(launch_error([&] { emu_test::wrong_mask(out.get()); }),
             Contains("__shfl_sync: thread (31,0,0) (warp 0 lane 31) is not in its own mask 0x0000ffff"));
}

TEST_CASE("emu debug: early return before a barrier is an error only in strict mode", "[emu][debug]") {
  std::vector<float> in(64);
  for (int i = 0; i < 64; ++i) in[i] = float(i);
  DeviceBuffer<float> din(in), dout(64);
  ConfigGuard g;
  cuda_emu::config().strict = false;
  emu_test::early_return(din.get(), dout.get(), 50);  // legal: returned threads count as arrived
  const auto out = dout.download();
  for (int t = 0; t < 50; ++t) REQUIRE(out[t] == in[49 - t]);
  cuda_emu::config().strict = true;
  const std::string msg = launch_error([&] { emu_test::early_return(din.get(), dout.get(), 50); });
  INFO(msg);
  CHECK_THAT(msg, Contains("CUDA_EMU_STRICT: 14 thread(s) returned before the __syncthreads() at buggy.cu:"));
  emu_test::early_return(din.get(), dout.get(), 64);  // nobody returns early: fine in strict mode
}

TEST_CASE("emu debug: dynamic shared memory overflow faults (forked child)", "[emu][debug][smem]") {
  // In bounds: the child exits normally.
  int status = emu_test::run_in_child([] {
    DeviceBuffer<float> out(64);
    emu_test::smem_write(out.get(), 64, 63);
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // One element past the end hits the guard page.
  status = emu_test::run_in_child([] {
    DeviceBuffer<float> out(64);
    emu_test::smem_write(out.get(), 64, 64);
  });
  INFO("wait status " << status);
  CHECK(emu_test::died_of_fault(status));
}

TEST_CASE("emu debug: CUDA_EMU_DEBUG fills dynamic shared memory with NaN", "[emu][debug][smem]") {
  ConfigGuard g;
  DeviceBuffer<float> out(4 * 64);
  cuda_emu::config().debug = true;
  emu_test::uninitialised_smem(out.get(), 4);
  const auto v = out.download();
  int nans = 0;
  for (float f : v) nans += std::isnan(f) ? 1 : 0;
  CHECK(nans == int(v.size()));
}

TEST_CASE("emu debug: exceptions in a kernel come out of launch() with the block index", "[emu][debug]") {
  DeviceBuffer<int> out(16 * 64);
  (void)cudaGetLastError();  // start clean
  try {
    emu_test::throwing(out.get(), 16, 5, 3);
    FAIL("no kernel_error");
  } catch (const cuda_emu::kernel_error& e) {
    INFO(e.what());
    CHECK(e.block.x == 5);
    CHECK(e.block.y == 0);
    CHECK(e.block_linear == 5);
    CHECK_THAT(std::string(e.what()), Contains("block (5,0,0)"));
    CHECK_THAT(e.detail, Contains("thread (3,0,0): boom from a kernel"));
  }
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaSuccess);

  // The emulator is still usable: the same kernel without a failing thread, many times.
  for (int rep = 0; rep < 3; ++rep) {
    emu_test::throwing(out.get(), 16, -1, -1);
    const auto v = out.download();
    for (int i = 0; i < 16 * 64; ++i) REQUIRE(v[i] == i % 64);
  }
  const std::string trap = launch_error([&] { emu_test::trap(out.get()); });
  CHECK_THAT(trap, Contains("block (0,0,0): thread (7,0,0): __trap() called"));
}
