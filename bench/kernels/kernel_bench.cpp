// Microbenchmarks of the CUDA backend's kernels, one case per kernel (the table: kernel_cases.h).
//
//   kernel_bench [--device cuda|emu] [--filter SUBSTRING] [--runs N]
//   kernel_bench --device emu --profile [--size emu|gpu] [--arch 61|75|90] [--max-blocks N] [--filter SUBSTRING]
//   kernel_bench --list   (each case's name, GPU size and emulator size, tab-separated; runs nothing)
//
// Times on a GPU come from CUDA events around back-to-back calls (enough for about 20 ms a round;
// the median of `runs` rounds), so a small kernel reports the kernel, not a launch plus a host-side
// synchronisation.
//
// On a GPU (--device cuda, the default when one exists) each case prints its achieved bandwidth
// (GB/s of compulsory traffic: every input read once, every output written once) or GFLOP/s next
// to the device's measured limits, taken in the same run:
//   * bandwidth: a device-to-device copy of 512 MiB (cudaMemcpy through the device interface);
//   * GEMM rate: SGEMM at 4096^3 through the default path (cuBLAS), so the tiled kernel's figure
//     reads as a share of cuBLAS (DEFINE_CUDA_GEMM=tiled makes the default the tiled kernel).
// On the emulated device (--device emu, the default without a GPU) the same kernels run on the
// CPU through the CUDA emulator at smaller sizes; each case prints the emulator's time next to the
// fast CPU path's time for the same op and size, i.e. what the emulator costs, which is what the
// emulator test suite's run time is made of. Emulator figures say nothing about GPU speed.
//
// --profile (emulated device): each case's launches through the emulator's profiling mode and
// performance model (cuda_emu/emu_profile.hpp, emu_perf_model.hpp; bench/kernels/kernel_profile.h):
// per launch the grid, the global loads' and stores' sector efficiency, shared-memory wavefronts
// per conflict-free wavefront, active lanes per memory instruction, the registers ptxas reports
// and the occupancy they allow, and the estimated time on a GTX 1080 Ti (sm_61), an RTX 2080 Ti
// (sm_75) and an H200 (sm_90) with the limit that binds; per case the estimated share of each
// GPU's copy rate, the figure kernel_bench --device cuda measures (for a compute-bound case, of its
// peak arithmetic rate: FP32, plus the tensor cores for the FLOPs the profile saw in mma.sync).
// Targets whose launches differ (sm_61's widening fallback against sm_75's tensor-core kernels) get
// rows of their own. --size gpu profiles the GPU sizes (minutes: every block runs; at most
// --max-blocks blocks a launch are recorded, default 4096);
// --arch profiles for that target alone (a third of the time; the other columns show "-").
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/kernels/kernel_cases.h"
#include "bench/kernels/kernel_profile.h"
#include "core/device.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "kernels/matmul.h"

namespace {

using namespace define;
using namespace define::bench::kernel_bench;
using bench::best_seconds;

// Seconds per call on the GPU: CUDA events around back-to-back calls, as many as take about 20 ms,
// the median of `runs` rounds.
double gpu_seconds(const std::function<void()>& f, Device d, int runs) {
#if defined(DEFINE_HAS_CUDA_KERNELS)
  const double once = define::cuda::seconds_per_call(d.index, f, 1);
  const int reps = int(std::clamp(0.02 / std::max(once, 1e-7), 3.0, 1000.0));
  std::vector<double> rounds;
  for (int i = 0; i < runs; ++i) rounds.push_back(define::cuda::seconds_per_call(d.index, f, reps));
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
#else
  return best_seconds(f, d, runs);  // unreachable: a build without CUDA kernels has no GPU device
#endif
}

// Device-to-device copy bandwidth (read + write) in GB/s: the practical ceiling for the
// memory-bound kernels.
double measured_copy_bandwidth(Device d, int runs) {
  const std::int64_t n = 128 << 20;  // floats: 512 MiB
  Tensor x = zeros({n}, {DType::Float32, d}), y = empty({n}, {DType::Float32, d});
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  const double s = gpu_seconds(
      [&] { device_interface(d.type).copy_device(y.raw_data(), d.index, x.raw_data(), d.index, bytes); }, d, runs);
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

std::string shorten(std::string s, std::size_t n) {
  if (s.size() > n) {
    s.resize(n - 3);
    s.append("...");  // appending, not "..." + s: GCC 12 warns (-Wrestrict) on the concatenation at -O3
  }
  return s;
}

// One row per launch of `launches[ref]`: its profile, and per target in `group` (the targets
// that made the same launches) its registers, occupancy and estimate.
void print_launch_rows(const std::vector<::cuda_emu::KernelProfile> (&launches)[3],
                       const std::vector<bench::kernel_bench::LaunchEstimate> (&est)[3], const bool (&group)[3],
                       int ref) {
  const auto pct = [](const ::cuda_emu::AccessCounts& a, bool shared) {
    return a.requests > 0 ? fmt::format("{:.0f}", 100 * a.efficiency(shared)) : std::string("-");
  };
  for (std::size_t i = 0; i < launches[ref].size(); ++i) {
    const ::cuda_emu::KernelProfile& k = launches[ref][i];
    std::string r, o, t, limit = "-";
    for (int a = 0; a < 3; ++a) {
      const auto* e = group[a] ? &est[a][i] : nullptr;
      // Appended piece by piece: GCC 12 warns (-Wrestrict) on "/" + std::string at -O3.
      r += a ? "/" : "";
      r += !e ? std::string("-") : e->registers ? std::to_string(e->registers) : std::string("32*");
      o += a ? "/" : "";
      o += e ? fmt::format("{:.0f}", 100 * e->estimate.occ.fraction) : std::string("-");
      t += a ? " / " : "";
      t += e ? fmt::format("{:.1f}", e->estimate.us) : std::string("-");
      if (a == 2 && e) limit = e->estimate.limiter;
    }
    const double shared_ideal = k.shared_load.ideal + k.shared_store.ideal;
    const std::string smem =
        k.shared_load.requests + k.shared_store.requests > 0
            ? fmt::format("{:.2f}", (k.shared_load.sectors + k.shared_store.sectors) / std::max(shared_ideal, 1.0))
            : std::string("-");
    const double requests = k.global_load.requests + k.global_store.requests + k.global_atomic.requests +
                            k.shared_load.requests + k.shared_store.requests + k.shared_atomic.requests;
    const double lanes = k.global_load.lanes + k.global_store.lanes + k.global_atomic.lanes + k.shared_load.lanes +
                         k.shared_store.lanes + k.shared_atomic.lanes;
    fmt::print("  {:<42} {:>14} {:>5} {:>5} {:>5} {:>5.1f} {:>13} {:>14} {:>26} {:>12}\n", shorten(k.kernel, 42),
               fmt::format("{}x{}", k.blocks, k.threads_per_block()), pct(k.global_load, false),
               pct(k.global_store, false), smem, requests > 0 ? lanes / requests : 0.0, r, o, t, limit);
  }
}

// The profile table (see the header comment). Each case is profiled once per target: grids sized
// from the device's multiprocessor count differ between them (the emulated device reports the
// target's count while profiling).
void print_profiles(const std::string& filter, bool gpu_size, std::uint64_t max_blocks, int only_arch) {
  using bench::kernel_bench::kProfileArchs;
  const bench::kernel_bench::RegisterTable regs(bench::kernel_bench::default_register_table());
  if (regs.empty())
    fmt::print("(no register table at {}: every kernel estimated at 32 registers)\n",
               bench::kernel_bench::default_register_table());
  fmt::print(
      "Emulator profile and performance model, {} sizes. Per launch (as profiled for the first target that made "
      "it): ld/st = global "
      "sector efficiency (ncu smsp__sass_average_data_bytes_per_sector_mem_global_op_ld/st.pct), smem = shared "
      "wavefronts per conflict-free wavefront, lanes = active lanes per memory instruction, regs and theoretical "
      "occupancy per target, estimated microseconds on sm_61 / sm_75 / sm_90 and the limit that binds on "
      "sm_90. * = registers not in kernels/cuda/ptxas-registers.txt (32 assumed).\n\n",
      gpu_size ? "GPU" : "emulator");
  fmt::print("{:<44} {:>14} {:>5} {:>5} {:>5} {:>5} {:>13} {:>14} {:>26} {:>12}\n", "case / kernel", "grid x block",
             "ld%", "st%", "smem", "lanes", "regs 61/75/90", "occ% 61/75/90", "est us 61 / 75 / 90", "sm_90 limit");
  const Device emu = Device::emu();
  const int arch_before = ::cuda_emu::config().arch;
  for (const Case& c : cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    const Problem p = c.make(emu, gpu_size);
    std::vector<::cuda_emu::KernelProfile> launches[3];
    bool profiled[3] = {false, false, false};
    for (int a = 0; a < 3; ++a) {
      if (only_arch && kProfileArchs[a] != only_arch) continue;
      profiled[a] = true;
      ::cuda_emu::config().arch = kProfileArchs[a];
      launches[a] = bench::kernel_bench::profile_problem(p, ::cuda_emu::ProfileSettings{.max_blocks = max_blocks});
    }
    ::cuda_emu::config().arch = arch_before;
    // Per target: each launch's estimate. The case's FLOPs that the profile did not see on the tensor
    // cores (mma.sync) ran on the FP32 units; they go to the launch that moves the most bytes.
    std::vector<bench::kernel_bench::LaunchEstimate> est[3];
    double total_us[3] = {0, 0, 0}, fp32_flops[3] = {0, 0, 0}, tensor_flops[3] = {0, 0, 0};
    for (int a = 0; a < 3; ++a) {
      std::size_t heaviest = 0;
      for (std::size_t i = 0; i < launches[a].size(); ++i) {
        if (launches[a][i].total_global_bytes() > launches[a][heaviest].total_global_bytes()) heaviest = i;
        tensor_flops[a] += launches[a][i].tensor_flops;
      }
      fp32_flops[a] = std::max(0.0, p.flops - tensor_flops[a]);
      for (std::size_t i = 0; i < launches[a].size(); ++i) {
        est[a].push_back(bench::kernel_bench::estimate_launch(launches[a][i], *::cuda_emu::gpu_spec(kProfileArchs[a]),
                                                              regs, i == heaviest ? fp32_flops[a] : 0));
        total_us[a] += est[a].back().estimate.us;
      }
    }
    fmt::print("{} ({})\n", c.name, gpu_size ? c.size_gpu : c.size_emu);
    // Targets whose launches differ (a tensor-core kernel from sm_75, its widening fallback below)
    // get their own rows, headed by the targets they are for; columns of other targets show "-".
    const auto same_launches = [&](int a, int b) {
      if (launches[a].size() != launches[b].size()) return false;
      for (std::size_t i = 0; i < launches[a].size(); ++i)
        if (launches[a][i].kernel != launches[b][i].kernel) return false;
      return true;
    };
    bool shown[3] = {false, false, false};
    for (int ref = 0; ref < 3; ++ref) {
      if (!profiled[ref] || shown[ref]) continue;
      bool group[3] = {false, false, false};
      std::string targets;
      for (int a = ref; a < 3; ++a)
        if (profiled[a] && !shown[a] && same_launches(a, ref)) {
          group[a] = shown[a] = true;
          targets += fmt::format("{}sm_{}", targets.empty() ? "" : ", ", kProfileArchs[a]);
        }
      bool split = false;
      for (int a = 0; a < 3; ++a) split = split || (profiled[a] && !group[a]);
      if (split) fmt::print("  on {}:\n", targets);
      print_launch_rows(launches, est, group, ref);
    }
    // The share of the physical limit: the case's arithmetic at the peak rates (FP32 and tensor) or
    // its bytes at the copy rate, over the estimate.
    std::string shares;
    bool tensor = false;
    for (int a = 0; a < 3; ++a) {
      if (!profiled[a]) continue;
      const ::cuda_emu::GpuSpec& g = *::cuda_emu::gpu_spec(kProfileArchs[a]);
      tensor = tensor || tensor_flops[a] > 0;
      const double limit_us = p.flops > 0 ? fp32_flops[a] / (g.fp32_gflops * 1e3) +
                                                (tensor_flops[a] > 0 ? tensor_flops[a] / (g.tensor_gflops * 1e3) : 0.0)
                                          : p.bytes / (g.copy_gbs * 1e3);
      shares += fmt::format("{}{} {:.0f}%", shares.empty() ? "" : ", ", g.name, 100 * limit_us / total_us[a]);
    }
    std::string totals;
    for (int a = 0; a < 3; ++a)
      totals += (a ? " / " : "") + (profiled[a] ? fmt::format("{:.1f}", total_us[a]) : std::string("-"));
    fmt::print("  = estimated {} us; of the {} limit: {}\n", totals,
               p.flops > 0 ? (tensor ? "FP32 + tensor-core" : "FP32") : "copy-rate", shares);
  }
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  using namespace define;
  std::string device_name, filter;
  int runs = 5;
  bool profile = false, gpu_size = false;
  std::uint64_t max_blocks = 4096;
  int only_arch = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list") {  // for scripts/checks/check-kernel-peers.py: the peer must have the same cases
      for (const Case& c : cases()) fmt::print("{}\t{}\t{}\n", c.name, c.size_gpu, c.size_emu);
      return 0;
    }
    if (a == "--device" && i + 1 < argc) device_name = argv[++i];
    else if (a == "--profile")
      profile = true;
    else if (a == "--size" && i + 1 < argc && (std::string(argv[i + 1]) == "gpu" || std::string(argv[i + 1]) == "emu"))
      gpu_size = std::string(argv[++i]) == "gpu";
    else if (a == "--max-blocks" && i + 1 < argc)
      max_blocks = std::uint64_t(std::max(1, std::atoi(argv[++i])));
    else if (a == "--arch" && i + 1 < argc && ::cuda_emu::gpu_spec(std::atoi(argv[i + 1])))
      only_arch = std::atoi(argv[++i]);
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr,
                 "usage: kernel_bench [--device cuda|emu] [--filter SUBSTRING] [--runs N]\n"
                 "       kernel_bench --device emu --profile [--size emu|gpu] [--arch 61|75|90] [--max-blocks N] "
                 "[--filter SUBSTRING]\n"
                 "       kernel_bench --list\n");
      return 2;
    }
  }
  try {
    const kernels::DeviceAvailability avail = kernels::register_devices();
    if (device_name.empty()) device_name = avail.cuda_devices > 0 ? "cuda" : "emu";
    const Device dev = Device::parse(device_name);
    if (dev.is_cpu()) fail("kernel_bench", "pick a CUDA device (cuda or emu); the CPU path is the baseline of emu");
    const bool gpu = dev.is_cuda();
    if (gpu && avail.cuda_devices == 0) fail("kernel_bench", "no GPU here (run with --device emu)");
    if (profile) {
      if (gpu) fail("kernel_bench", "--profile runs on the emulated device (--device emu); on a GPU use ncu");
      print_profiles(filter, gpu_size, max_blocks, only_arch);
      return 0;
    }

    if (gpu) {
      const double bw = measured_copy_bandwidth(dev, runs);
      Tensor a = uniform({4096, 4096}, dev), b = uniform({4096, 4096}, dev);
      const double peak =
          2.0 * 4096.0 * 4096.0 * 4096.0 / gpu_seconds([&] { (void)kernels::matmul(a, b); }, dev, runs) * 1e-9;
      fmt::print("device {}: measured copy bandwidth {:.0f} GB/s, SGEMM 4096^3 {:.0f} GFLOP/s\n\n", dev.str(), bw,
                 peak);
      fmt::print("{:<28} {:>22} {:>10} {:>12} {:>9}\n", "kernel", "size", "time", "achieved", "of limit");
      for (const Case& c : cases()) {
        if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
        const Problem p = c.make(dev, true);
        const double s = gpu_seconds(p.run, dev, runs);
        if (p.flops > 0)
          fmt::print("{:<28} {:>22} {:>8.3f}ms {:>7.0f} GF/s {:>8.0f}%\n", c.name, c.size_gpu, s * 1e3,
                     p.flops / s * 1e-9, 100 * p.flops / s * 1e-9 / peak);
        else
          fmt::print("{:<28} {:>22} {:>8.3f}ms {:>7.0f} GB/s {:>8.0f}%\n", c.name, c.size_gpu, s * 1e3,
                     p.bytes / s * 1e-9, 100 * p.bytes / s * 1e-9 / bw);
      }
      return 0;
    }

    fmt::print("emulated CUDA device: the CUDA kernels on the CPU (g++ + fibers), against the fast CPU path\n");
    fmt::print("on the same op and size, best of {} after a warm-up. Emulator times say nothing about GPU speed.\n\n",
               runs);
    fmt::print("{:<28} {:>20} {:>11} {:>11} {:>14}\n", "kernel", "size", "emu", "cpu path", "emulator cost");
    for (const Case& c : cases()) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const Problem pe = c.make(dev, false);
      const double se = best_seconds(pe.run, dev, runs);
      const Problem pc = c.make(Device::cpu(), false);
      const double sc = best_seconds(pc.run, Device::cpu(), runs);
      fmt::print("{:<28} {:>20} {:>9.2f}ms {:>9.2f}ms {:>13.1f}x\n", c.name, c.size_emu, se * 1e3, sc * 1e3, se / sc);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "kernel_bench: {}\n", e.what());
    return 2;
  }
  return 0;
}
