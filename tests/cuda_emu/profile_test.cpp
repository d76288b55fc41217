// The profiling mode (cuda_emu/emu_profile.hpp) on kernels whose memory behaviour is known in
// advance (kernels/access_patterns.cu): sectors and sector efficiency of coalesced, strided,
// broadcast and 16-byte global accesses, active lanes, shared-memory bank conflicts, the distinct
// DRAM sectors of a launch, sampling of large grids, and the kernel's name from the symbol table.
#include <utility>
#include <vector>

#include "emu_test_support.hpp"
#include "kernels/access_patterns.cuh"

using emu_test::DeviceBuffer;

// The sanitizer builds compile the kernels without the access instrumentation the profile records.
#if !defined(__SANITIZE_ADDRESS__)

namespace {

cuda_emu::KernelProfile profile_one(const auto& launch_it, cuda_emu::ProfileSettings settings = {}) {
  cuda_emu::profile_start(settings);
  launch_it();
  std::vector<cuda_emu::KernelProfile> p = cuda_emu::profile_stop();
  REQUIRE(p.size() == 1);
  return p[0];
}

}  // namespace

TEST_CASE("emu profile: coalesced and strided global loads, sectors and efficiency", "[emu][profile]") {
  const int n = 1024;
  DeviceBuffer<float> x(std::size_t(n) * 8), y(n);
  for (const int stride : {1, 2, 8}) {
    CAPTURE(stride);
    const cuda_emu::KernelProfile p = profile_one([&] { emu_test::strided_copy(x.get(), y.get(), n, stride); });
    CHECK(p.kernel == "strided_copy_kernel");
    CHECK(p.blocks == 4);
    CHECK(p.profiled_blocks == 4);
    CHECK(p.block.x == 256);
    // 32 warps, one load and one store each; a lane reads 4 bytes.
    CHECK(p.global_load.requests == 32);
    CHECK(p.global_load.lanes == 1024);
    CHECK(p.global_load.bytes == 4096);
    // A warp's 32 loads span 128 * stride bytes: 4 * stride sectors, at most one per lane.
    const double sectors_per_request = stride == 8 ? 32 : 4 * stride;
    CHECK(p.global_load.sectors == 32 * sectors_per_request);
    CHECK(p.global_load.ideal == 32 * 4);
    CHECK(p.global_load.efficiency(false) == Approx(4.0 / sectors_per_request));
    CHECK(p.global_store.requests == 32);
    CHECK(p.global_store.sectors == 128);
    CHECK(p.global_store.efficiency(false) == 1.0);
    CHECK(p.dram_read_bytes == 32 * 32 * sectors_per_request);
    CHECK(p.dram_write_bytes == 4096);
    CHECK(p.load_instructions == 1);
    CHECK(p.loads_in_flight == 1.0);
    CHECK(p.shared_load.requests == 0);
    CHECK(p.shared_store.requests == 0);
  }
}

TEST_CASE("emu profile: a broadcast load uses one sector of which it needs 4 bytes", "[emu][profile]") {
  DeviceBuffer<float> x(1), y(256);
  const cuda_emu::KernelProfile p = profile_one([&] { emu_test::broadcast_copy(x.get(), y.get(), 256); });
  CHECK(p.global_load.requests == 8);
  CHECK(p.global_load.sectors == 8);
  CHECK(p.global_load.bytes == 8 * 4);
  CHECK(p.global_load.efficiency(false) == Approx(4.0 / 32));
  CHECK(p.dram_read_bytes == 32);  // the launch reads one sector
}

TEST_CASE("emu profile: 16-byte loads are one request of 16 sectors per warp", "[emu][profile]") {
  DeviceBuffer<float> x(1024), y(1024);
  const cuda_emu::KernelProfile p = profile_one([&] { emu_test::vector_copy(x.get(), y.get(), 256); });
  CHECK(p.global_load.requests == 8);
  CHECK(p.global_load.sectors == 8 * 16);
  CHECK(p.global_load.bytes == 4096);
  CHECK(p.global_load.efficiency(false) == 1.0);
  CHECK(p.global_store.sectors == 8 * 16);
}

TEST_CASE("emu profile: lanes that skip an instruction are not in its request", "[emu][profile]") {
  DeviceBuffer<float> x(64), y(64);
  for (const int active : {32, 8, 1}) {
    CAPTURE(active);
    const cuda_emu::KernelProfile p = profile_one([&] { emu_test::partial_warp_copy(x.get(), y.get(), active); });
    CHECK(p.global_load.requests == 2);
    CHECK(p.global_load.lanes == 2 * active);
    CHECK(p.global_load.sectors == 2 * ((active * 4 + 31) / 32));
  }
}

TEST_CASE("emu profile: shared-memory wavefronts count bank conflicts", "[emu][profile]") {
  DeviceBuffer<float> y(32);
  // stride s words: the 32 lanes fall in 32 / gcd(s, 32) banks, gcd(s, 32) words in each.
  for (const auto& [stride_, ways] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {3, 1}, {8, 8}, {32, 32}}) {
    const int stride = stride_;  // captured below: clang before 16 cannot capture a structured binding
    CAPTURE(stride);
    const cuda_emu::KernelProfile p = profile_one([&] { emu_test::shared_stride(y.get(), stride); });
    CHECK(p.static_smem == 32 * 32 * 4);
    CHECK(p.shared_store.requests == 1);
    CHECK(p.shared_store.sectors == ways);
    CHECK(p.shared_store.ideal == 1);
    CHECK(p.shared_load.requests == 1);
    CHECK(p.shared_load.sectors == ways);
    CHECK(p.shared_load.efficiency(true) == Approx(1.0 / ways));
  }
}

TEST_CASE("emu profile: a large grid is sampled and scaled to every block", "[emu][profile]") {
  const int n = 256 * 64;
  std::vector<float> values(n);
  for (int i = 0; i < n; ++i) values[std::size_t(i)] = float(i);
  DeviceBuffer<float> x(values), y(n);
  const cuda_emu::KernelProfile all = profile_one([&] { emu_test::strided_copy(x.get(), y.get(), n, 1); });
  const cuda_emu::KernelProfile some =
      profile_one([&] { emu_test::strided_copy(x.get(), y.get(), n, 1); }, cuda_emu::ProfileSettings{.max_blocks = 16});
  CHECK(all.profiled_blocks == 64);
  // At most 16 of 64: every 4th block, made odd (every 5th: blocks 0, 5, ..., 60), so that the sample
  // does not sit at one phase of a power-of-two period; the counts are scaled by 64 / 13.
  CHECK(some.profiled_blocks == 13);
  CHECK(some.global_load.requests == Approx(all.global_load.requests).epsilon(1e-12));
  CHECK(some.global_load.sectors == Approx(all.global_load.sectors).epsilon(1e-12));
  CHECK(some.dram_read_bytes == Approx(all.dram_read_bytes).epsilon(1e-12));
  CHECK(y.download() == values);  // every block ran, recorded or not
}

TEST_CASE("emu profile: a sample counts what every block reads alike once, as the whole grid does", "[emu][profile]") {
  // Every thread of 64 blocks reads x[0], of an 8-float allocation: one sector for the whole launch.
  // The 13 blocks of a sample read it too; scaled by 64 / 13 they would stand for 4.9 sectors.
  const int n = 256 * 64;
  DeviceBuffer<float> x(std::vector<float>(8, 2.0f)), y(n);
  const cuda_emu::KernelProfile all = profile_one([&] { emu_test::broadcast_copy(x.get(), y.get(), n); });
  const cuda_emu::KernelProfile some =
      profile_one([&] { emu_test::broadcast_copy(x.get(), y.get(), n); }, cuda_emu::ProfileSettings{.max_blocks = 16});
  CHECK(some.profiled_blocks == 13);
  CHECK(all.dram_read_bytes == 32);
  CHECK(some.dram_read_bytes == 32);
  // The writes, distinct in every block, scale as before.
  CHECK(some.dram_write_bytes == Approx(all.dram_write_bytes).epsilon(1e-12));
}

TEST_CASE("emu profile: where the warp converges, lanes that skipped an access pair up again", "[emu][profile]") {
  DeviceBuffer<float> x(std::vector<float>(32 * 32, 1.0f)), y(32 * 32);
  // Converged after each row: one load request per row, as a GPU issues it.
  const cuda_emu::KernelProfile aligned = profile_one([&] { emu_test::ragged_rows(x.get(), y.get(), 32, true); });
  // Row r's r + 1 lanes: ceil((r + 1) / 8) sectors, 8 (1 + 2 + 3 + 4) = 80 in all.
  CHECK(aligned.global_load.requests == 32);
  CHECK(aligned.global_load.lanes == 32 * 33 / 2);
  CHECK(aligned.global_load.sectors == 80);
  // Never converged: lane l's n-th load is row l + n, so request n holds lanes 0..31-n from as many
  // rows, a sector each: 32 + 31 + ... + 1 = 528.
  const cuda_emu::KernelProfile ragged = profile_one([&] { emu_test::ragged_rows(x.get(), y.get(), 32, false); });
  CHECK(ragged.global_load.lanes == 32 * 33 / 2);
  CHECK(ragged.global_load.sectors == 528);
}

TEST_CASE("emu profile: loads in flight are the loads of one loop iteration", "[emu][profile]") {
  const int n = 512;
  DeviceBuffer<float> x(std::size_t(n) * 8), y(n);
  const cuda_emu::KernelProfile four = profile_one([&] { emu_test::four_loads(x.get(), y.get(), n); });
  CHECK(four.load_instructions == 4);
  CHECK(four.loads_in_flight == 4.0);
  // Two loops of one load each, one after the other: one load in flight at a time.
  const cuda_emu::KernelProfile looped = profile_one([&] { emu_test::looped_loads(x.get(), y.get(), n, 8); });
  CHECK(looped.load_instructions == 2);
  CHECK(looped.loads_in_flight == Approx(1.0).epsilon(0.15));
}

TEST_CASE("emu profile: a sector a block loads again is an L1 hit, one another block loads is not", "[emu][profile]") {
  const int n = 512;
  DeviceBuffer<float> x(std::size_t(n) * 8), y(n);
  // Each of 2 blocks reads 8 rows of its 256 floats (256 sectors) in one loop, then again in a second.
  const cuda_emu::KernelProfile looped = profile_one([&] { emu_test::looped_loads(x.get(), y.get(), n, 8); });
  CHECK(looped.global_load.sectors == 1024);
  CHECK(looped.l1_hit_sectors == 512);
  const cuda_emu::KernelProfile four = profile_one([&] { emu_test::four_loads(x.get(), y.get(), n); });
  CHECK(four.l1_hit_sectors == 0);
  // The 8 warps of a block read one sector: 7 hits a block, and no block hits what another read.
  const int blocks = 64;
  DeviceBuffer<float> one(std::vector<float>(8, 2.0f)), out(std::size_t(256) * blocks);
  const cuda_emu::KernelProfile all =
      profile_one([&] { emu_test::broadcast_copy(one.get(), out.get(), 256 * blocks); });
  CHECK(all.global_load.sectors == 8 * blocks);
  CHECK(all.l1_hit_sectors == 7 * blocks);
  const cuda_emu::KernelProfile some =
      profile_one([&] { emu_test::broadcast_copy(one.get(), out.get(), 256 * blocks); },
                  cuda_emu::ProfileSettings{.max_blocks = 16});
  CHECK(some.l1_hit_sectors == Approx(7 * blocks));  // scaled from the sample
}

TEST_CASE("emu profile: nothing is recorded outside profile_start / profile_stop", "[emu][profile]") {
  DeviceBuffer<float> x(256), y(256);
  emu_test::strided_copy(x.get(), y.get(), 256, 1);
  cuda_emu::profile_start();
  CHECK(cuda_emu::profile_stop().empty());
}

TEST_CASE("emu profile: a 16-byte structure copy split into fields by g++ is one 16-byte access", "[emu][profile]") {
  // vector_copy copies float4 values; whatever g++ makes of the copy, the profile sees 16 bytes a lane.
  DeviceBuffer<float> x(4096), y(4096);
  const cuda_emu::KernelProfile p = profile_one([&] { emu_test::vector_copy(x.get(), y.get(), 1024); });
  CHECK(p.global_load.requests == 32);
  CHECK(p.global_load.lanes == 1024);
  CHECK(p.global_load.bytes == 16384);
  CHECK(p.global_load.efficiency(false) == 1.0);
}

#endif  // !__SANITIZE_ADDRESS__
