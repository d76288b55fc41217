// The performance model (cuda_emu/emu_perf_model.hpp) on hand-made profiles whose answer is worked
// out here: theoretical occupancy as the CUDA occupancy calculator gives it, and which limit binds
// (DRAM, L2 sectors, shared wavefronts, FP32, tensor cores, launch) with its time.
#include "emu_test_support.hpp"

#include "cuda_emu/emu_perf_model.hpp"

namespace {

const cuda_emu::GpuSpec& spec(int arch) {
  const cuda_emu::GpuSpec* g = cuda_emu::gpu_spec(arch);
  REQUIRE(g != nullptr);
  return *g;
}

// A launch of `blocks` blocks of 256 threads that moves `bytes` through DRAM in fully used sectors,
// with eight loads in flight per thread (enough to hide latency on every target).
cuda_emu::KernelProfile streaming(double bytes, std::uint64_t blocks) {
  cuda_emu::KernelProfile p;
  p.block = dim3(256);
  p.blocks = blocks;
  p.dram_read_bytes = bytes / 2;
  p.dram_write_bytes = bytes / 2;
  p.global_load.requests = bytes / 2 / 128;
  p.global_load.sectors = bytes / 2 / 32;
  p.global_store.sectors = bytes / 2 / 32;
  p.loads_in_flight = 8;
  return p;
}

}  // namespace

TEST_CASE("perf model: occupancy is limited by threads, registers and shared memory", "[emu][perf_model]") {
  // 256 threads at 32 registers: 2048 threads an sm_61 multiprocessor, 8 blocks, full.
  cuda_emu::Occupancy o = cuda_emu::occupancy(spec(61), 256, 32, 0);
  CHECK(o.blocks_per_sm == 8);
  CHECK(o.fraction == 1.0);
  CHECK(o.limiter == "threads");
  // 128 threads at 128 registers: 4096 registers a warp, 16 warps of 65536: 4 blocks of 4 warps, a
  // quarter of sm_61's 64 warps and half of sm_75's 32.
  o = cuda_emu::occupancy(spec(61), 128, 128, 0);
  CHECK(o.blocks_per_sm == 4);
  CHECK(o.fraction == 0.25);
  CHECK(o.limiter == "registers");
  CHECK(cuda_emu::occupancy(spec(75), 128, 128, 0).fraction == 0.5);
  // 33 registers round up to 40 a thread (1280 a warp, allocated in 256s): 51 warps, 6 blocks of 8.
  CHECK(cuda_emu::occupancy(spec(61), 256, 33, 0).blocks_per_sm == 6);
  // 40 KiB of shared memory: 2 blocks in sm_61's 96 KiB; on the H200 each block also reserves 1 KiB,
  // 5 blocks in 228 KiB.
  o = cuda_emu::occupancy(spec(61), 128, 32, 40 * 1024);
  CHECK(o.blocks_per_sm == 2);
  CHECK(o.limiter == "shared memory");
  CHECK(cuda_emu::occupancy(spec(90), 128, 32, 40 * 1024).blocks_per_sm == 5);
}

TEST_CASE("perf model: each limit binds in its turn", "[emu][perf_model]") {
  const cuda_emu::GpuSpec& h200 = spec(90);
  SECTION("DRAM: 1 GB at the copy rate") {
    const cuda_emu::Estimate e = cuda_emu::estimate(streaming(1e9, 100000), h200, 32);
    CHECK(e.limiter == "dram");
    CHECK(e.dram_us == Approx(1e9 / (h200.copy_gbs * 1e3)));
    CHECK(e.us == Approx(h200.launch_us + e.dram_us));
  }
  SECTION("latency: one block cannot keep the memory busy") {
    const cuda_emu::Estimate e = cuda_emu::estimate(streaming(1e8, 1), h200, 32);
    CHECK(e.limiter == "latency");
    // 8 warps x 128 bytes x 8 loads in flight every 650 ns.
    CHECK(e.latency_us == Approx(1e8 / (8.0 * 128 * 8 / h200.latency_ns * 1e3)));
  }
  SECTION("L2 sectors: four bytes used of each sector") {
    cuda_emu::KernelProfile p = streaming(1e9, 100000);
    p.global_load.sectors *= 8;
    const cuda_emu::Estimate e = cuda_emu::estimate(p, h200, 32);
    CHECK(e.limiter == "l2 sectors");
    CHECK(e.l2_us == Approx(32.0 * (p.global_load.sectors + p.global_store.sectors) / (h200.l2_gbs * 1e3)));
  }
  SECTION("L2 sectors: loads a block repeats are L1 hits and move nothing from L2") {
    cuda_emu::KernelProfile p = streaming(1e9, 100000);
    const double once = p.global_load.sectors;
    p.global_load.sectors *= 3;  // every sector loaded three times by its block
    p.l1_hit_sectors = 2 * once;
    const cuda_emu::Estimate e = cuda_emu::estimate(p, h200, 32);
    CHECK(e.l2_us == Approx(32.0 * (once + p.global_store.sectors) / (h200.l2_gbs * 1e3)));
    CHECK(e.limiter == "dram");
  }
  SECTION("shared wavefronts") {
    cuda_emu::KernelProfile p = streaming(1e6, 100000);
    p.shared_load.sectors = 1e9;
    const cuda_emu::Estimate e = cuda_emu::estimate(p, h200, 32);
    CHECK(e.limiter == "shared");
    CHECK(e.shared_us == Approx(1e9 / (h200.sms * h200.clock_ghz * 1e3)));
  }
  SECTION("FP32: the caller's FLOPs") {
    const cuda_emu::Estimate e = cuda_emu::estimate(streaming(1e6, 100000), h200, 32, 1e12);
    CHECK(e.limiter == "fp32");
    CHECK(e.fp32_us == Approx(1e12 / (h200.fp32_gflops * 1e3)));
  }
  SECTION("tensor cores: the profile's mma.sync FLOPs, at the tensor rate") {
    cuda_emu::KernelProfile p = streaming(1e6, 100000);
    p.tensor_flops = 1e15;
    const cuda_emu::Estimate e = cuda_emu::estimate(p, h200, 32);
    CHECK(e.limiter == "tensor");
    CHECK(e.tensor_us == Approx(1e15 / (h200.tensor_gflops * 1e3)));
    CHECK(e.tensor_us * 10 < 1e15 / (h200.fp32_gflops * 1e3));  // the same FLOPs in FFMA: over 10x longer
    const cuda_emu::Estimate turing = cuda_emu::estimate(p, spec(75), 32);
    CHECK(turing.tensor_us == Approx(1e15 / 53.8e6));
  }
  SECTION("launch: a tiny kernel costs the launch") {
    const cuda_emu::Estimate e = cuda_emu::estimate(streaming(1024, 1), h200, 32);
    CHECK(e.limiter == "launch");
    CHECK(e.us < 2 * h200.launch_us);
  }
  SECTION("waves: blocks over the resident blocks of every multiprocessor") {
    const cuda_emu::Estimate e = cuda_emu::estimate(streaming(1e6, 8 * 132 * 3), h200, 32);
    CHECK(e.waves == 3.0);
  }
}
