// The fused LSTM layer (lstm_layer: one input-projection GEMM, per step one GEMM + one fused cell
// kernel, BPTT in one autograd node) next to the same layer composed of generic autograd ops per
// step, as an LSTMCell loop would be written:
//   gates = linear(x_t, w_ih, b_ih) + linear(h, w_hh, b_hh); i, f, g, o = chunk(gates, 4)
//   c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c); y = stack(h_1 .. h_T)
// (about 15 recorded ops per step). Same inputs, same process; forward alone (no grad) and forward +
// backward (upstream gradient on y into x, h0, c0 and all weights). Best of N timed runs after a
// warm-up; tokens/s = T * B / time; ratio = composed time / fused time (> 1: fused is faster).
//
//   lstm_bench [--device cpu|cuda] [--runs N] [--threads N]
//
// Sizes: T = 35, B = 20 with I = H = 200 (a small word-level LM) and I = 400, H = 1150 (one
// AWD-LSTM layer), float32, 2 CPU threads by default. Runs on the CPU and then on a GPU (nvcc
// build with a GPU present; otherwise says why it skipped), or only on the --device given.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/device.h"
#include "kernels/devices.h"
#include "kernels/cpu/gemm_provider.h"

DEFINE_BENCH_FAMILY("lstm");

namespace {

using namespace define;
using bench::best_seconds;

struct Size {
  std::int64_t T, B, I, H;
};

// Leaves x [T, B, I], h0, c0 [B, H], w_ih, w_hh, b_ih, b_hh requiring grad; upstream dy [T, B, H].
struct Problem {
  Size s;
  Tensor x, h0, c0, w_ih, w_hh, b_ih, b_hh, dy;
  std::vector<Tensor> leaves() const { return {x, h0, c0, w_ih, w_hh, b_ih, b_hh}; }
};

Problem make_problem(const Size& s, Device device) {
  Generator gen(7);
  const double k = 1.0 / std::sqrt(static_cast<double>(s.H));
  const auto leaf = [&](const Shape& shape, double range) {
    return copy_to_device(rand_uniform(shape, -range, range, {}, gen), device).set_requires_grad(true);
  };
  Problem p;
  p.s = s;
  p.x = leaf({s.T, s.B, s.I}, 1.0);
  p.h0 = leaf({s.B, s.H}, 0.5);
  p.c0 = leaf({s.B, s.H}, 0.5);
  p.w_ih = leaf({4 * s.H, s.I}, k);
  p.w_hh = leaf({4 * s.H, s.H}, k);
  p.b_ih = leaf({4 * s.H}, k);
  p.b_hh = leaf({4 * s.H}, k);
  p.dy = copy_to_device(rand_uniform({s.T, s.B, s.H}, -1, 1, {}, gen), device);
  return p;
}

Tensor fused_forward(const Problem& p) { return lstm_layer(p.x, p.h0, p.c0, p.w_ih, p.w_hh, p.b_ih, p.b_hh).output; }

Tensor composed_forward(const Problem& p) {
  Tensor h = p.h0, c = p.c0;
  std::vector<Tensor> ys;
  for (std::int64_t t = 0; t < p.s.T; ++t) {
    const Tensor gates = add(linear(select(p.x, 0, t), p.w_ih, p.b_ih), linear(h, p.w_hh, p.b_hh));
    const std::vector<Tensor> g = chunk(gates, 4, 1);
    c = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
    h = mul(sigmoid(g[3]), tanh(c));
    ys.push_back(h);
  }
  return stack(ys, 0);
}

using Forward = Tensor (*)(const Problem&);

std::function<void()> forward_only(const Problem& p, Forward f) {
  return [&p, f] {
    NoGradGuard no_grad;
    (void)f(p);
  };
}

std::function<void()> train_step(const Problem& p, Forward f) {
  return [&p, f] {
    for (const Tensor& t : p.leaves()) t.set_grad(Tensor());
    backward(f(p), p.dy);
  };
}

void bench_device(Device device, int runs) {
  fmt::print("{:>22} {:>12} {:>12} {:>7}   {:>12} {:>12} {:>7}\n", "T x B, I -> H", "fwd fused", "fwd comp.", "ratio",
             "f+b fused", "f+b comp.", "ratio");
  for (const Size& s : {Size{35, 20, 200, 200}, Size{35, 20, 400, 1150}}) {
    const Problem p = make_problem(s, device);
    const double tokens = static_cast<double>(s.T * s.B);
    const double ff = best_seconds(forward_only(p, fused_forward), device, runs);
    const double fc = best_seconds(forward_only(p, composed_forward), device, runs);
    const double tf = best_seconds(train_step(p, fused_forward), device, runs);
    const double tc = best_seconds(train_step(p, composed_forward), device, runs);
    const auto rate = [&](double seconds) { return fmt::format("{:.0f} tok/s", tokens / seconds); };
    fmt::print("{:>22} {:>12} {:>12} {:>6.2f}x   {:>12} {:>12} {:>6.2f}x\n",
               fmt::format("{}x{}, {} -> {}", s.T, s.B, s.I, s.H), rate(ff), rate(fc), fc / ff, rate(tf), rate(tc),
               tc / tf);
    fmt::print("{:>22} {:>10.2f}ms {:>10.2f}ms {:>7}   {:>10.2f}ms {:>10.2f}ms\n", "", ff * 1e3, fc * 1e3, "",
               tf * 1e3, tc * 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  std::string only;  // empty: cpu, then cuda when a GPU is present
  int runs = 5, threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--device" && has_value) only = argv[++i];
    else if (a == "--runs" && has_value) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && has_value) threads = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: lstm_bench [--device cpu|cuda] [--runs N] [--threads N]\n");
      return 2;
    }
  }
  try {
    const kernels::DeviceAvailability avail = kernels::register_devices();
    omp_set_num_threads(threads);
    for (const std::string name : {"cpu", "cuda"}) {
      if (!only.empty() && only != name) continue;
      const Device device = Device::parse(name);
      if (device.is_cuda() && avail.cuda_devices == 0) {
        fmt::print("lstm_bench on cuda: skipped ({})\n",
                   kernels::built_with_cuda() ? "no GPU found" : "this build has no nvcc-compiled backend");
        continue;
      }
      fmt::print("LSTM layer, fused (lstm_layer) vs composed of generic ops per step, on {}, float32, {} CPU "
                 "threads, best of {};\ntokens/s = T*B / time, ratio = composed / fused\n\n",
                 device.str(), threads, runs);
      bench_device(device, runs);
      fmt::print("\n");
    }
  } catch (const Error& e) {
    fmt::print(stderr, "lstm_bench: {}\n", e.what());
    return 2;
  }
  return 0;
}
