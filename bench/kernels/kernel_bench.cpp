// Microbenchmarks of the CUDA backend's kernels, one case per kernel (see cases() below).
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
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "core/device.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/cuda/gemm_config.h"
#include "kernels/devices.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/index.h"
#include "kernels/layer_norm.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "kernels/rel_attention.h"
#include "kernels/softmax.h"

namespace {

using namespace define;
using bench::best_seconds;

struct Problem {
  double bytes = 0;  // compulsory memory traffic of one call
  double flops = 0;  // for compute-bound kernels (GEMM); 0 otherwise
  std::function<void()> run;
};

// A case builds its inputs on a device at a size, and returns the call to time.
struct Case {
  std::string name;
  std::string size_gpu, size_emu;  // shown in the table
  std::function<Problem(Device device, bool gpu_size)> make;
};

Tensor uniform(const Shape& s, Device d) { return copy_to_device(rand_uniform(s, -1, 1), d); }
Tensor indices(const Shape& s, std::int64_t high, Device d) { return copy_to_device(rand_int(s, high), d); }
double f32_bytes(double elements) { return 4.0 * elements; }

std::vector<Case> cases() {
  std::vector<Case> c;
  // n elements: 64M on a GPU, 1M on the emulator.
  auto n_of = [](bool gpu) -> std::int64_t { return gpu ? (64 << 20) : (1 << 20); };

  c.push_back({"copy (transpose)", "8192x8192", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 8192 : 1024;
                 Tensor x = uniform({n, n}, d), y = empty({n, n}, {DType::Float32, d});
                 const Tensor xt = x.as_strided({n, n}, {1, n}, 0);
                 return Problem{f32_bytes(2.0 * n * n), 0, [=] { kernels::copy_into(y, xt); }};
               }});
  c.push_back({"fill", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor y = empty({n_of(gpu)}, {DType::Float32, d});
                 return Problem{f32_bytes(n_of(gpu)), 0, [=] { kernels::fill(y, 1.5); }};
               }});
  c.push_back({"unary gelu", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor x = uniform({n_of(gpu)}, d), y = empty_like(x);
                 return Problem{f32_bytes(2.0 * n_of(gpu)), 0,
                                [=] { kernels::unary_into(kernels::UnaryOp::Gelu, y, x); }};
               }});
  c.push_back({"binary add (row broadcast)", "16384x4096 + 4096", "1024x1024 + 1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor a = uniform({r, k}, d), b = uniform({k}, d), y = empty_like(a);
                 return Problem{f32_bytes(2.0 * r * k + k), 0,
                                [=] { kernels::binary_into(kernels::BinaryOp::Add, y, a, b); }};
               }});
  c.push_back({"sum (last dim)", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + r), 0, [=] { (void)kernels::sum(x, {1}, false); }};
               }});
  c.push_back({"sum (first dim)", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + k), 0, [=] { (void)kernels::sum(x, {0}, false); }};
               }});
  c.push_back({"column_sum", "16384x4096", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = gpu ? 4096 : 1024;
                 Tensor x = uniform({r, k}, d);
                 return Problem{f32_bytes(1.0 * r * k + k), 0, [=] { (void)kernels::column_sum(x); }};
               }});
  c.push_back({"log_softmax", "4096x32000", "256x10000", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 4096 : 256, v = gpu ? 32000 : 10000;
                 Tensor x = uniform({r, v}, d);
                 return Problem{f32_bytes(2.0 * r * v), 0, [=] { (void)kernels::log_softmax(x, 1); }};
               }});
  c.push_back({"cross_entropy rows", "4096x32000", "256x10000", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 4096 : 256, v = gpu ? 32000 : 10000;
                 Tensor x = uniform({r, v}, d), t = indices({r}, v, d);
                 return Problem{f32_bytes(1.0 * r * v + 2.0 * r), 0,
                                [=] { (void)kernels::cross_entropy_rows(x, t, -100, 0.0); }};
               }});
  c.push_back({"layer_norm forward", "16384x1024", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = 1024;
                 Tensor x = uniform({r, k}, d), w = uniform({k}, d), b = uniform({k}, d);
                 return Problem{f32_bytes(2.0 * r * k + 2.0 * r), 0, [=] { (void)kernels::layer_norm(x, w, b, 1e-5); }};
               }});
  c.push_back({"layer_norm backward", "16384x1024", "1024x1024", [](Device d, bool gpu) {
                 const std::int64_t r = gpu ? 16384 : 1024, k = 1024;
                 Tensor x = uniform({r, k}, d), w = uniform({k}, d), b = uniform({k}, d), dy = uniform({r, k}, d);
                 const kernels::LayerNormOutputs o = kernels::layer_norm(x, w, b, 1e-5);
                 return Problem{f32_bytes(3.0 * r * k + 2.0 * r), 0, [=] {
                                  (void)kernels::layer_norm_backward(dy, x, w, o.mean, o.rstd, true, true, true);
                                }};
               }});
  c.push_back({"dropout", "64M", "1M", [n_of](Device d, bool gpu) {
                 Tensor x = uniform({n_of(gpu)}, d);
                 return Problem{f32_bytes(2.0 * n_of(gpu)), 0, [=] { (void)kernels::dropout_apply(x, 0.3, 7, 0); }};
               }});
  // Transformer-XL's fused relative-attention row kernel (scores from AC and the shifted BD, causal
  // + window mask, softmax, dropout: reads AC and BD, writes P and D) and its backward's unshift,
  // at B x H x Tq x Tk with a memory of M = Tq.
  c.push_back({"rel_attention rows", "64x8x150x300", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 150 : 64, tk = 2 * tq;
                 Tensor ac = uniform({b, h, tq, tk}, d), bd = uniform({b, h, tq, tk}, d);
                 const kernels::RelAttentionParams p{.window = tq, .scale = 0.15, .dropout = 0.1, .seed = 7};
                 return Problem{f32_bytes(4.0 * b * h * tq * tk), 0,
                                [=] { (void)kernels::rel_attention_softmax(ac, bd, p); }};
               }});
  c.push_back({"rel_attention unshift", "64x8x150x300", "8x8x64x128", [](Device d, bool gpu) {
                 const std::int64_t b = gpu ? 64 : 8, h = 8, tq = gpu ? 150 : 64, tk = 2 * tq;
                 Tensor g = uniform({b, h, tq, tk}, d);
                 return Problem{f32_bytes(2.0 * b * h * tq * tk), 0, [=] { (void)kernels::rel_attention_unshift(g); }};
               }});
  c.push_back({"embedding forward", "65536 tok x 1024", "8192 tok x 400", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, m = gpu ? 1024 : 400, v = 10000;
                 Tensor w = uniform({v, m}, d), idx = indices({t}, v, d);
                 return Problem{f32_bytes(2.0 * t * m) + 8.0 * t, 0, [=] { (void)kernels::embedding(w, idx); }};
               }});
  c.push_back({"embedding backward", "65536 tok x 1024", "8192 tok x 400", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, m = gpu ? 1024 : 400, v = 10000;
                 Tensor g = uniform({t, m}, d), idx = indices({t}, v, d);
                 return Problem{f32_bytes(1.0 * t * m + 1.0 * v * m) + 8.0 * t, 0,
                                [=] { (void)kernels::embedding_backward(g, idx, v, -1); }};
               }});
  c.push_back({"index_select rows", "65536 of 16384x1024", "8192 of 4096x256", [](Device d, bool gpu) {
                 const std::int64_t t = gpu ? 65536 : 8192, r = gpu ? 16384 : 4096, m = gpu ? 1024 : 256;
                 Tensor x = uniform({r, m}, d), idx = indices({t}, r, d);
                 return Problem{f32_bytes(2.0 * t * m) + 8.0 * t, 0, [=] { (void)kernels::index_select(x, 0, idx); }};
               }});
  c.push_back({"gemm (default path)", "4096^3", "256^3", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 4096 : 256;
                 Tensor a = uniform({n, n}, d), b = uniform({n, n}, d);
                 return Problem{f32_bytes(3.0 * n * n), 2.0 * n * n * n, [=] { (void)kernels::matmul(a, b); }};
               }});
  // The backend's own tiled kernel (the emulator always runs it; on a GPU it reads as a share of cuBLAS).
  c.push_back({"gemm (tiled kernel)", "4096^3", "256^3", [](Device d, bool gpu) {
                 const std::int64_t n = gpu ? 4096 : 256;
                 Tensor a = uniform({n, n}, d), b = uniform({n, n}, d);
                 return Problem{f32_bytes(3.0 * n * n), 2.0 * n * n * n, [=] {
                                  const kernels::CudaGemm previous = kernels::cuda_gemm();
                                  kernels::set_cuda_gemm(kernels::CudaGemm::Tiled);
                                  (void)kernels::matmul(a, b);
                                  kernels::set_cuda_gemm(previous);
                                }};
               }});
  c.push_back({"bmm 64 x 128^3", "64x128^3", "8x128^3", [](Device d, bool gpu) {
                 const std::int64_t batch = gpu ? 64 : 8, n = 128;
                 Tensor a = uniform({batch, n, n}, d), b = uniform({batch, n, n}, d);
                 return Problem{f32_bytes(3.0 * batch * n * n), 2.0 * batch * n * n * n,
                                [=] { (void)kernels::matmul(a, b); }};
               }});
  return c;
}

// Device-to-device copy bandwidth (read + write) in GB/s: the practical ceiling for the
// memory-bound kernels.
double measured_copy_bandwidth(Device d, int runs) {
  const std::int64_t n = 128 << 20;  // floats: 512 MiB
  Tensor x = zeros({n}, {DType::Float32, d}), y = empty({n}, {DType::Float32, d});
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  const double s = best_seconds([&] { device_interface(d.type).copy_device(y.raw_data(), x.raw_data(), bytes); }, d,
                                runs);
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
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
