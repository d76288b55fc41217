// The fused attention op (scaled_dot_product_attention: GEMM, one fused mask + softmax + dropout
// row kernel, GEMM; kernels/attention.h) against the composite of generic differentiable ops it
// replaced: matmul(q, k^T) * scale, masked_fill per mask, softmax, masked_fill 0 (fully masked
// rows), dropout, matmul with v. Both run through autograd: forward alone (no graph), and forward
// + backward (define::grad for dq, dk, dv). float32, best of 10 after a warm-up, B = 16, H = 4,
// d = 64, T = 128 and 256, three mask settings. Ratios are composite time / fused time.
// CPU (fast path, `threads` OpenMP threads), then the same on a CUDA device when one exists.
//   attention_bench [threads]     (default 2)
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/device.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/devices.h"

DEFINE_BENCH_FAMILY("attention");

namespace {

using namespace define;
using bench::best_seconds;

// Timed calls per measurement (the best counts): enough to find a quiet moment on a shared machine.
constexpr int kRuns = 10;

struct Setting {
  const char* name;
  bool padding;
  bool causal;
  double dropout;
};

// [B, Tk] int32: batch b pads its last (b % 4) * Tk / 8 keys.
Tensor padding_mask(std::int64_t b, std::int64_t tk, Device device) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(b * tk));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < tk; ++j) m[static_cast<std::size_t>(i * tk + j)] = j >= tk - (i % 4) * tk / 8;
  return from_vector(m, Shape{b, tk}, device);
}

Tensor causal_mask(std::int64_t t, Device device) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(t * t));
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < t; ++j) m[static_cast<std::size_t>(i * t + j)] = j > i;
  return from_vector(m, Shape{t, t}, device);
}

// What the fused op replaces, in generic ops (the masks prepared once, outside the timing).
Tensor attention_by_generic_ops(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<Tensor>& masks,
                                double p, Generator& gen) {
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(double(q.size(3))));
  for (const Tensor& m : masks) scores = masked_fill(scores, m, std::numeric_limits<float>::lowest());
  Tensor probs = softmax(scores, -1);
  for (const Tensor& m : masks) probs = masked_fill(probs, m, 0.0);
  if (p > 0) probs = dropout(contiguous(probs), p, true, gen);
  return matmul(probs, v);
}

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
  const std::int64_t b = 16, h = 4, d = 64;
  const std::vector<Setting> settings{{"no mask", false, false, 0.0},
                                      {"padding", true, false, 0.0},
                                      {"causal+drop0.1", false, true, 0.1}};
  fmt::print("  {:>4} {:<15} {:>9} {:>9} {:>6}   {:>9} {:>9} {:>6}\n", "T", "masks", "fused fw", "composite", "ratio",
             "fused f+b", "composite", "ratio");
  for (const std::int64_t t : {std::int64_t{128}, std::int64_t{256}}) {
    Generator data(1);
    const TensorOptions opt{.device = device};
    Tensor q = rand_uniform({b, h, t, d}, -1, 1, opt, data), k = rand_uniform({b, h, t, d}, -1, 1, opt, data);
    Tensor v = rand_uniform({b, h, t, d}, -1, 1, opt, data);
    const Tensor up = rand_uniform({b, h, t, d}, -1, 1, opt, data);
    q.set_requires_grad();
    k.set_requires_grad();
    v.set_requires_grad();
    for (const Setting& s : settings) {
      const Tensor pad = s.padding ? padding_mask(b, t, device) : Tensor();
      std::vector<Tensor> masks;
      if (s.padding) masks.push_back(reshape(pad, {b, 1, 1, t}));
      if (s.causal) masks.push_back(causal_mask(t, device));
      Generator gen(5);
      const Timing fused = time_op(
          [&] {
            return scaled_dot_product_attention(
                q, k, v, {.key_padding_mask = pad, .causal = s.causal, .dropout = s.dropout, .generator = &gen});
          },
          {q, k, v}, up, device);
      const Timing composite =
          time_op([&] { return attention_by_generic_ops(q, k, v, masks, s.dropout, gen); }, {q, k, v}, up, device);
      fmt::print("  {:>4} {:<15} {:9.3f} {:9.3f} {:6.2f}   {:9.3f} {:9.3f} {:6.2f}\n", t, s.name, fused.forward * 1e3,
                 composite.forward * 1e3, composite.forward / fused.forward, fused.forward_backward * 1e3,
                 composite.forward_backward * 1e3, composite.forward_backward / fused.forward_backward);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  const kernels::DeviceAvailability devices = kernels::register_devices();
  fmt::print("Attention, float32, B=16 H=4 d=64, best of 10 (ms; ratio = composite / fused)\n");
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
