// Microbenchmarks of the CUDA backend's kernels, one case per kernel (the table: kernel_cases.h).
//
//   kernel_bench [--device cuda|emu] [--filter SUBSTRING] [--runs N]
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
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/kernels/kernel_cases.h"
#include "core/device.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/devices.h"
#include "kernels/matmul.h"

namespace {

using namespace define;
using namespace define::bench::kernel_bench;
using bench::best_seconds;

// Device-to-device copy bandwidth (read + write) in GB/s: the practical ceiling for the
// memory-bound kernels.
double measured_copy_bandwidth(Device d, int runs) {
  const std::int64_t n = 128 << 20;  // floats: 512 MiB
  Tensor x = zeros({n}, {DType::Float32, d}), y = empty({n}, {DType::Float32, d});
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  const double s = best_seconds(
      [&] { device_interface(d.type).copy_device(y.raw_data(), d.index, x.raw_data(), d.index, bytes); }, d, runs);
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  using namespace define;
  std::string device_name, filter;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device_name = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: kernel_bench [--device cuda|emu] [--filter SUBSTRING] [--runs N]\n");
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

    if (gpu) {
      const double bw = measured_copy_bandwidth(dev, runs);
      Tensor a = uniform({4096, 4096}, dev), b = uniform({4096, 4096}, dev);
      const double peak = 2.0 * 4096.0 * 4096.0 * 4096.0 /
                          best_seconds([&] { (void)kernels::matmul(a, b); }, dev, runs) * 1e-9;
      fmt::print("device {}: measured copy bandwidth {:.0f} GB/s, SGEMM 4096^3 {:.0f} GFLOP/s\n\n", dev.str(), bw,
                 peak);
      fmt::print("{:<28} {:>22} {:>10} {:>12} {:>9}\n", "kernel", "size", "time", "achieved", "of limit");
      for (const Case& c : cases()) {
        if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
        const Problem p = c.make(dev, true);
        const double s = best_seconds(p.run, dev, runs);
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
