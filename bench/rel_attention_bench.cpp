// The fused relative-position attention of Transformer-XL (relative_attention: GEMMs around one
// fused shift + mask + softmax + dropout row kernel; kernels/rel_attention.h) against the
// composite of generic differentiable ops it replaces (bench/rel_attention_composite.h: matmul
// with q + u and q + w, the reference code's pad-and-reshape _rel_shift, masked_fill, softmax,
// dropout, matmul with v). Both run through autograd: forward alone (no graph), and forward +
// backward (define::grad for all six inputs). float32, best of 10 after a warm-up, at
// Transformer-XL-like shapes: B = 8, H = 8, d = 48, Tq = 64 and 150 with a memory of M = Tq
// (Tk = 2 Tq), three settings. Ratios are composite time / fused time. CPU (fast path, `threads`
// OpenMP threads), then the same on a CUDA device when one exists.
//   rel_attention_bench [threads]     (default 2)
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "bench/rel_attention_composite.h"
#include "core/device.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/devices.h"

DEFINE_BENCH_FAMILY("rel_attention");

namespace {

using namespace define;
using bench::best_seconds;

// Timed calls per measurement (the best counts): enough to find a quiet moment on a shared machine.
constexpr int kRuns = 10;

struct Setting {
  const char* name;
  bool window;  // same_length: each query sees its last Tq keys
  double dropout;
};

struct Timing {
  double forward, forward_backward;
};

Timing time_op(const std::function<Tensor()>& f, const std::vector<Tensor>& inputs, const Tensor& up, Device device) {
  Timing t{};
  {
    NoGradGuard no_grad;
    t.forward = best_seconds([&] { (void)f(); }, device, kRuns);
  }
  t.forward_backward = best_seconds([&] { (void)grad(f(), inputs, up); }, device, kRuns);
  return t;
}

void compare_on(Device device) {
  const std::int64_t b = 8, h = 8, d = 48;
  const std::vector<Setting> settings{{"plain", false, 0.0}, {"drop0.1", false, 0.1}, {"window+drop0.1", true, 0.1}};
  fmt::print("  {:>4} {:>4} {:<15} {:>9} {:>9} {:>6}   {:>9} {:>9} {:>6}\n", "Tq", "Tk", "setting", "fused fw",
             "composite", "ratio", "fused f+b", "composite", "ratio");
  for (const std::int64_t tq : {std::int64_t{64}, std::int64_t{150}}) {
    const std::int64_t tk = 2 * tq;
    Generator data(1);
    const TensorOptions opt{.device = device};
    std::vector<Tensor> in{rand_uniform({b, h, tq, d}, -1, 1, opt, data), rand_uniform({b, h, tk, d}, -1, 1, opt, data),
                           rand_uniform({b, h, tk, d}, -1, 1, opt, data), rand_uniform({h, tk, d}, -1, 1, opt, data),
                           rand_uniform({h, d}, -1, 1, opt, data),        rand_uniform({h, d}, -1, 1, opt, data)};
    for (Tensor& t : in) t.set_requires_grad();
    const Tensor up = rand_uniform({b, h, tq, d}, -1, 1, opt, data);
    for (const Setting& s : settings) {
      const std::int64_t window = s.window ? tq : 0;
      const Tensor hidden = bench::rel_attention_hidden_keys(tq, tk, window, device);
      const double scale = 1.0 / std::sqrt(double(d));
      Generator gen(5);
      const Timing fused = time_op(
          [&] {
            return relative_attention(in[0], in[1], in[2], in[3], in[4], in[5],
                                      {.window = window, .dropout = s.dropout, .generator = &gen});
          },
          in, up, device);
      const Timing composite = time_op(
          [&] {
            return bench::rel_attention_by_generic_ops(in[0], in[1], in[2], in[3], in[4], in[5], hidden, scale,
                                                       s.dropout, gen);
          },
          in, up, device);
      fmt::print("  {:>4} {:>4} {:<15} {:9.3f} {:9.3f} {:6.2f}   {:9.3f} {:9.3f} {:6.2f}\n", tq, tk, s.name,
                 fused.forward * 1e3, composite.forward * 1e3, composite.forward / fused.forward,
                 fused.forward_backward * 1e3, composite.forward_backward * 1e3,
                 composite.forward_backward / fused.forward_backward);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  const kernels::DeviceAvailability devices = kernels::register_devices();
  fmt::print("Relative-position attention, float32, B=8 H=8 d=48, memory M=Tq, best of {} (ms; ratio = composite / "
             "fused)\n",
             kRuns);
  fmt::print("CPU, {} threads\n", omp_get_max_threads());
  compare_on(Device::cpu());
  if (devices.cuda_devices > 0) {
    fmt::print("CUDA device 0\n");
    compare_on(Device::cuda(0));
  } else {
    fmt::print("CUDA: skipped ({})\n", kernels::built_with_cuda() ? "no GPU found" : "this build has no nvcc backend");
  }
  return 0;
}
