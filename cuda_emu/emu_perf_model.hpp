// CUDA execution emulator: a roofline estimate of a launch's time on a target GPU, from its profile
// (emu_profile.hpp), its register count (ptxas) and its floating-point work (the caller's count of
// FP32 FLOPs; the profile's count of tensor-core FLOPs).
//
// The estimate is the slowest of the limits a launch can hit, plus a fixed launch cost:
//   dram     distinct bytes the launch reads and writes / the device's copy rate;
//   latency  the same bytes / the rate the resident warps can sustain: warps resident on the GPU x
//            bytes each has in flight / memory latency (Little's law). A warp has in flight one
//            request's sectors for each load a thread issues before repeating an instruction (one
//            loop iteration's loads, up to 8; KernelProfile::loads_in_flight): a loop with one
//            scalar load keeps 128 bytes in flight per warp, unrolled by four 512; the cp.async
//            copies a thread issues before its wait count together, as a GPU runs them;
//   l2       32-byte sectors the requests move between L2 and the multiprocessors / L2 bandwidth:
//            a request that uses 4 bytes of each sector moves 8x the data it needs; a load of a
//            sector its block read before is served by the L1 and moves nothing (the L1 is taken
//            to hold what a block re-reads; on sm_61 only read-only loads, const __restrict__ or
//            __ldg, are cached there, which the emulator cannot tell apart);
//   shared   shared-memory wavefronts / (multiprocessors x one wavefront a clock): bank conflicts;
//   fp32     FLOPs / peak FP32 rate;
//   tensor   the profile's mma.sync FLOPs / peak tensor rate for 16-bit inputs with float accumulation.
// Occupancy is computed as the CUDA occupancy calculator does: blocks per multiprocessor limited by
// threads, the block limit, registers (allocated per warp in units of 256) and shared memory.
//
// The device figures are the vendors' specifications (multiprocessors, clocks, DRAM and FP32
// peaks, L2 size, per-multiprocessor limits); copy rates, L2 bandwidths and latencies are typical
// measured values of those GPUs from public microbenchmarks, except the H200's copy rate, which is
// define's own measurement (docs/results.md). Tensor rates are dense 16-bit inputs with float
// accumulation: the RTX 2080 Ti's is half its float16-accumulation rate (GeForce Turing); the H200's
// is the peak of the sm_90a warpgroup instructions (wgmma), which mma.sync does not reach on Hopper,
// so there a tensor-bound estimate is a lower bound. The model ignores instruction issue, arithmetic
// latency, atomics' serialisation and L1 hits across blocks; it says which limit binds and by how much, not
// a cycle count. Its figures are checked against GPU measurements in docs/results.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_emu/emu_profile.hpp"

namespace cuda_emu {

struct GpuSpec {
  std::string name;
  int arch;            // compute capability x 10
  int sms;             // multiprocessors
  double clock_ghz;    // boost clock
  double copy_gbs;     // device-to-device copy rate (read + write), GB/s
  double l2_gbs;       // L2 <-> multiprocessor bandwidth, GB/s
  double fp32_gflops;  // peak FP32 rate
  double tensor_gflops;  // peak tensor rate, 16-bit inputs with float accumulation (0: no tensor cores)
  double latency_ns;   // DRAM latency under load
  double launch_us;    // fixed cost of a launch, back to back
  int max_threads_sm, max_blocks_sm, regs_sm;
  std::size_t smem_sm, smem_reserved_per_block;
};

// The GPUs define's users train on and the one it was measured on.
inline const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = {
      {"GTX 1080 Ti", 61, 28, 1.582, 420, 1300, 11340, 0, 500, 4.0, 2048, 32, 65536, 96 * 1024, 0},
      {"RTX 2080 Ti", 75, 68, 1.545, 530, 2000, 13450, 53800, 500, 3.5, 1024, 16, 65536, 64 * 1024, 0},
      {"H200", 90, 132, 1.98, 4112, 5500, 66900, 989400, 650, 2.5, 2048, 32, 65536, 228 * 1024, 1024},
  };
  return specs;
}

inline const GpuSpec* gpu_spec(int arch) {
  for (const GpuSpec& g : gpu_specs())
    if (g.arch == arch) return &g;
  return nullptr;
}

struct Occupancy {
  int blocks_per_sm = 0;
  double fraction = 0;  // resident warps / the multiprocessor's maximum (theoretical occupancy)
  std::string limiter;  // threads, blocks, registers or shared memory
};

inline Occupancy occupancy(const GpuSpec& g, std::uint64_t threads_per_block, int registers,
                           std::size_t smem_per_block) {
  Occupancy o;
  const int warps = int((threads_per_block + 31) / 32);
  const int max_warps = g.max_threads_sm / 32;
  auto take = [&o](int blocks, const char* why) {
    if (blocks < o.blocks_per_sm) {
      o.blocks_per_sm = blocks;
      o.limiter = why;
    }
  };
  o.blocks_per_sm = g.max_blocks_sm;
  o.limiter = "blocks";
  take(max_warps / std::max(warps, 1), "threads");
  const int regs_per_warp = (std::max(registers, 1) * 32 + 255) / 256 * 256;
  take(g.regs_sm / regs_per_warp / std::max(warps, 1), "registers");
  const std::size_t smem = smem_per_block ? smem_per_block + g.smem_reserved_per_block : 0;
  if (smem) take(int(g.smem_sm / ((smem + 127) / 128 * 128)), "shared memory");
  o.fraction = double(o.blocks_per_sm * warps) / max_warps;
  return o;
}

struct Estimate {
  Occupancy occ;
  double waves = 0;
  double dram_us = 0, latency_us = 0, l2_us = 0, shared_us = 0, fp32_us = 0, tensor_us = 0;
  double us = 0;        // the estimate: launch cost + the largest of the above
  std::string limiter;  // which of them
};

inline Estimate estimate(const KernelProfile& p, const GpuSpec& g, int registers, double flops = 0) {
  Estimate e;
  const std::uint64_t threads = p.threads_per_block();
  e.occ = occupancy(g, threads, registers, p.static_smem + p.dynamic_smem);
  const double warps_per_block = double((threads + 31) / 32);
  const double resident_blocks = double(std::max(e.occ.blocks_per_sm, 1)) * g.sms;
  e.waves = double(p.blocks) / resident_blocks;
  const double resident_warps = std::min(double(p.blocks), resident_blocks) * warps_per_block;

  const double dram_bytes = p.dram_read_bytes + p.dram_write_bytes;
  e.dram_us = dram_bytes / (g.copy_gbs * 1e3);
  const double loads = p.global_load.requests + p.global_atomic.requests;
  if (loads > 0) {
    const double bytes_per_request = 32.0 * (p.global_load.sectors + p.global_atomic.sectors) / loads;
    const double in_flight = resident_warps * bytes_per_request * p.loads_in_flight;
    const double sustained_gbs = std::min(g.copy_gbs, in_flight / g.latency_ns);  // bytes per ns = GB/s
    e.latency_us = dram_bytes / (sustained_gbs * 1e3);
  }
  const double sectors =
      p.global_load.sectors - p.l1_hit_sectors + p.global_store.sectors + 2 * p.global_atomic.sectors;
  e.l2_us = 32.0 * sectors / (g.l2_gbs * 1e3);
  const double wavefronts = p.shared_load.sectors + p.shared_store.sectors + 2 * p.shared_atomic.sectors;
  e.shared_us = wavefronts / (g.sms * g.clock_ghz * 1e3);
  e.fp32_us = flops / (g.fp32_gflops * 1e3);
  // A GPU without tensor cores never runs a launch with mma.sync (the emulator fails it below sm_75).
  if (g.tensor_gflops > 0) e.tensor_us = p.tensor_flops / (g.tensor_gflops * 1e3);

  e.limiter = "dram";
  double worst = e.dram_us;
  for (const auto& [t, name] :
       {std::pair{e.latency_us, "latency"}, std::pair{e.l2_us, "l2 sectors"}, std::pair{e.shared_us, "shared"},
        std::pair{e.fp32_us, "fp32"}, std::pair{e.tensor_us, "tensor"}}) {
    if (t > worst) {
      worst = t;
      e.limiter = name;
    }
  }
  if (g.launch_us > worst) e.limiter = "launch";
  e.us = g.launch_us + worst;
  return e;
}

}  // namespace cuda_emu
