// The fused DeFINE/DExTra mixer (split_mix, kernels/split_mix.h) against the composition of
// generic ops it replaces: chunk x and y into g pieces, shuffle y by reshape [T, s, q/s] ->
// transpose -> reshape (a strided copy), and concat the pieces interleaved. Both run through
// autograd (forward, then define::grad for dx and dy), on the CPU fast path, best of 5 after a
// warm-up, at T = 4096, p = 256, q = 512, g in {2, 4, 8}, shuffle off or with s = g (the previous
// GLT's group count in a DExTra expansion layer). Ratios are generic time / fused time.
// Then the emulator's cost: split_mix forward and backward on the emulated CUDA device next to
// the CPU fast path at a smaller size (emulator figures say nothing about GPU speed).
//   split_mix_bench [threads]     (default 2)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/index.h"
#include "autograd/split_mix.h"
#include "autograd/views.h"
#include "core/device.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/devices.h"
#include "kernels/split_mix.h"

DEFINE_BENCH_FAMILY("split_mix");

namespace {

using namespace define;
using bench::best_seconds;

// What split_mix replaces, in generic differentiable ops.
Tensor mix_by_generic_ops(const Tensor& x, const Tensor& y, std::int64_t g, std::int64_t s) {
  Tensor z = y;
  if (s > 1) {
    const std::int64_t t = y.shape()[0], q = y.shape()[1];
    z = reshape(transpose(reshape(y, {t, s, q / s}), 1, 2), {t, q});
  }
  const std::vector<Tensor> xs = chunk(x, g, -1), zs = chunk(z, g, -1);
  std::vector<Tensor> pieces;
  for (std::int64_t c = 0; c < g; ++c) {
    pieces.push_back(xs[c]);
    pieces.push_back(zs[c]);
  }
  return concat(pieces, -1);
}

struct Timing {
  double forward, forward_backward;
};

// Forward alone (no graph) and forward + backward (graph, then dx and dy) of one mixer.
Timing time_mixer(const std::function<Tensor(const Tensor&, const Tensor&)>& mix, const Tensor& x, const Tensor& y,
                  const Tensor& up) {
  Timing t{};
  {
    NoGradGuard no_grad;
    t.forward = best_seconds([&] { (void)mix(x, y); });
  }
  t.forward_backward = best_seconds([&] {
    const Tensor out = mix(x, y);
    (void)grad(out, {x, y}, up);
  });
  return t;
}

void cpu_comparison() {
  const std::int64_t t = 4096, p = 256, q = 512;
  Tensor x = rand_uniform({t, p}, -1, 1), y = rand_uniform({t, q}, -1, 1);
  const Tensor up = rand_uniform({t, p + q}, -1, 1);
  x.set_requires_grad();
  y.set_requires_grad();
  fmt::print("CPU, float32, T={} p={} q={}, {} threads, best of 5 (ms; ratio = generic / fused)\n", t, p, q,
             omp_get_max_threads());
  fmt::print("  {:>2} {:>7}  {:>9} {:>9} {:>6}   {:>9} {:>9} {:>6}\n", "g", "shuffle", "fused fw", "generic", "ratio",
             "fused f+b", "generic", "ratio");
  for (std::int64_t g : {2, 4, 8}) {
    for (std::int64_t s : {std::int64_t{0}, g}) {
      const Timing fused = time_mixer([&](const Tensor& a, const Tensor& b) { return split_mix(a, b, g, s); }, x, y, up);
      const Timing generic =
          time_mixer([&](const Tensor& a, const Tensor& b) { return mix_by_generic_ops(a, b, g, s); }, x, y, up);
      fmt::print("  {:>2} {:>7}  {:9.3f} {:9.3f} {:6.2f}   {:9.3f} {:9.3f} {:6.2f}\n", g,
                 s > 1 ? fmt::format("s={}", s) : "off", fused.forward * 1e3, generic.forward * 1e3,
                 generic.forward / fused.forward, fused.forward_backward * 1e3, generic.forward_backward * 1e3,
                 generic.forward_backward / fused.forward_backward);
    }
  }
}

// The emulator's time for the kernels next to the CPU fast path, same op and size.
void emulator_cost() {
  if (!kernels::register_devices().emu) {
    fmt::print("emulated device not available\n");
    return;
  }
  const std::int64_t t = 512, p = 256, q = 512, g = 4;
  const Tensor x = rand_uniform({t, p}, -1, 1), y = rand_uniform({t, q}, -1, 1), up = rand_uniform({t, p + q}, -1, 1);
  const Device emu = Device::emu();
  const Tensor xe = copy_to_device(x, emu), ye = copy_to_device(y, emu), upe = copy_to_device(up, emu);
  fmt::print("\nEmulated device vs CPU fast path, float32, T={} p={} q={} g={} (ms; ratio = emu / cpu)\n", t, p, q, g);
  fmt::print("  {:<26} {:>9} {:>9} {:>7}\n", "kernel", "emu", "cpu", "ratio");
  for (std::int64_t s : {std::int64_t{0}, g}) {
    const double fe = best_seconds([&] { (void)kernels::split_mix(xe, ye, g, s); }, emu, 3);
    const double fc = best_seconds([&] { (void)kernels::split_mix(x, y, g, s); });
    const double be = best_seconds([&] { (void)kernels::split_mix_backward(upe, p, g, s); }, emu, 3);
    const double bc = best_seconds([&] { (void)kernels::split_mix_backward(up, p, g, s); });
    const std::string tag = s > 1 ? fmt::format(" (s={})", s) : std::string(" (no shuffle)");
    fmt::print("  {:<26} {:9.3f} {:9.3f} {:7.1f}\n", "forward" + tag, fe * 1e3, fc * 1e3, fe / fc);
    fmt::print("  {:<26} {:9.3f} {:9.3f} {:7.1f}\n", "backward" + tag, be * 1e3, bc * 1e3, be / bc);
  }
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  cpu_comparison();
  emulator_cost();
  return 0;
}
