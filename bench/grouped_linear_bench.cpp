// Grouped linear (the GLT of DeFINE/DExTra) forward + backward, next to the composition of
// generic ops it replaces, in the same process on the same inputs:
//   grouped:   y = grouped_linear(x, w, b)                     (one grouped GEMM per pass)
//   composed:  y = concat([matmul(chunk_i(x), w_i) + b_i for i < g], -1)
//              (chunk + g matmuls + g bias adds + concat, each recorded by autograd)
// Both run backward() with the same upstream gradient into x, w and b. Best of N timed runs
// after a warm-up; the ratio is composed / grouped (> 1: grouped_linear is faster).
//
//   grouped_linear_bench [--device cpu|emu|cuda] [--rows T] [--in N] [--out N] [--runs N] [--threads N]
//
// cpu (default): T = 4096 rows, 512 -> 1024 features, g in {2, 4, 8}, float32, 2 threads.
// emu: the CUDA kernels on the emulated device at a smaller default size (T = 256, 128 -> 256),
//   next to the fast CPU path on the same size: the emulator's cost, which is what the emulator
//   tests' run time is made of (says nothing about GPU speed).
// cuda: on a GPU (nvcc build): grouped vs composed, and grouped_linear's tiled kernel
//   (DEFINE_CUDA_GEMM=tiled) next to the default cuBLAS path.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "autograd/ops.h"
#include "core/device.h"
#include "kernels/cuda/matmul_config.h"
#include "kernels/devices.h"
#include "kernels/cpu/gemm_provider.h"

DEFINE_BENCH_FAMILY("grouped_linear");

namespace {

using namespace define;
using bench::best_seconds;

// One problem: leaves x [T, in], w [g, in/g, out/g], b [g, out/g] requiring grad, and the upstream
// gradient dy [T, out], on `device`.
struct Problem {
  Tensor x, w, b, dy;
  std::int64_t groups;
};

Problem make_problem(std::int64_t rows, std::int64_t in, std::int64_t out, std::int64_t groups, Device device) {
  Generator gen(5);
  Problem p;
  p.groups = groups;
  p.x = copy_to_device(rand_uniform({rows, in}, -1, 1, {}, gen), device).set_requires_grad(true);
  p.w = copy_to_device(rand_uniform({groups, in / groups, out / groups}, -0.1, 0.1, {}, gen), device)
            .set_requires_grad(true);
  p.b = copy_to_device(rand_uniform({groups, out / groups}, -0.1, 0.1, {}, gen), device).set_requires_grad(true);
  p.dy = copy_to_device(rand_uniform({rows, out}, -1, 1, {}, gen), device);
  return p;
}

void clear_grads(const Problem& p) {
  for (const Tensor* t : {&p.x, &p.w, &p.b}) t->set_grad(Tensor());
}

Tensor grouped_forward(const Problem& p) { return grouped_linear(p.x, p.w, p.b); }

Tensor composed_forward(const Problem& p) {
  const std::vector<Tensor> chunks = chunk(p.x, p.groups, -1);
  std::vector<Tensor> parts;
  for (std::int64_t i = 0; i < p.groups; ++i)
    parts.push_back(add(matmul(chunks[i], select(p.w, 0, i)), select(p.b, 0, i)));
  return concat(parts, -1);
}

// Forward + backward of `forward` on p, with fresh gradients each time.
std::function<void()> train_step(const Problem& p, Tensor (*forward)(const Problem&)) {
  return [&p, forward] {
    clear_grads(p);
    backward(forward(p), p.dy);
  };
}

std::function<void()> forward_only(const Problem& p, Tensor (*forward)(const Problem&)) {
  return [&p, forward] {
    NoGradGuard no_grad;
    (void)forward(p);
  };
}

struct Options {
  std::string device = "cpu";
  std::int64_t rows = 0, in = 0, out = 0;
  int runs = 5, threads = 2;
};

// A dense GEMM with the grouped problem's FLOPs: x [T, in] @ w [in, out/g], forward + backward
// (the yardstick of the target: grouped within 1.3x of dense time per FLOP).
struct Dense {
  Tensor x, w, dy;
};

Dense make_dense(std::int64_t rows, std::int64_t in, std::int64_t out, Device device) {
  Generator gen(6);
  Dense d;
  d.x = copy_to_device(rand_uniform({rows, in}, -1, 1, {}, gen), device).set_requires_grad(true);
  d.w = copy_to_device(rand_uniform({in, out}, -0.1, 0.1, {}, gen), device).set_requires_grad(true);
  d.dy = copy_to_device(rand_uniform({rows, out}, -1, 1, {}, gen), device);
  return d;
}

std::function<void()> dense_step(const Dense& d) {
  return [&d] {
    d.x.set_grad(Tensor());
    d.w.set_grad(Tensor());
    backward(matmul(d.x, d.w), d.dy);
  };
}

void bench_against_composition(const Options& o, Device device) {
  fmt::print("{:>3} {:>16} {:>11} {:>11} {:>7}   {:>11} {:>11} {:>7}   {:>11} {:>13}\n", "g", "per-group GEMM",
             "fwd grouped", "fwd comp.", "ratio", "f+b grouped", "f+b comp.", "ratio", "f+b dense", "grouped/dense");
  for (std::int64_t g : {2, 4, 8}) {
    const Problem p = make_problem(o.rows, o.in, o.out, g, device);
    const Dense d = make_dense(o.rows, o.in, o.out / g, device);
    const double fg = best_seconds(forward_only(p, grouped_forward), device, o.runs);
    const double fc = best_seconds(forward_only(p, composed_forward), device, o.runs);
    const double tg = best_seconds(train_step(p, grouped_forward), device, o.runs);
    const double tc = best_seconds(train_step(p, composed_forward), device, o.runs);
    const double td = best_seconds(dense_step(d), device, o.runs);
    fmt::print("{:>3} {:>16} {:>9.2f}ms {:>9.2f}ms {:>6.2f}x   {:>9.2f}ms {:>9.2f}ms {:>6.2f}x   {:>9.2f}ms {:>12.2f}x\n",
               g, fmt::format("{}x{}x{}", o.rows, o.in / g, o.out / g), fg * 1e3, fc * 1e3, fc / fg, tg * 1e3,
               tc * 1e3, tc / tg, td * 1e3, tg / td);
  }
  fmt::print("(f+b dense: x [T, in] @ w [in, out/g], the same FLOPs as the grouped problem; grouped/dense is the "
             "time per FLOP ratio)\n");
}

void bench_emulator_cost(const Options& o) {
  const Device emu = Device::emu();
  fmt::print("{:>3} {:>16} {:>12} {:>12} {:>14}\n", "g", "per-group GEMM", "emu f+b", "cpu f+b", "emulator cost");
  for (std::int64_t g : {2, 4, 8}) {
    const Problem pe = make_problem(o.rows, o.in, o.out, g, emu);
    const Problem pc = make_problem(o.rows, o.in, o.out, g, Device::cpu());
    const double te = best_seconds(train_step(pe, grouped_forward), emu, o.runs);
    const double tc = best_seconds(train_step(pc, grouped_forward), Device::cpu(), o.runs);
    fmt::print("{:>3} {:>16} {:>10.2f}ms {:>10.2f}ms {:>13.1f}x\n", g,
               fmt::format("{}x{}x{}", o.rows, o.in / g, o.out / g), te * 1e3, tc * 1e3, te / tc);
  }
}

void bench_tiled_vs_cublas(const Options& o, Device device) {
  fmt::print("\ngrouped_linear f+b, tiled kernel vs cuBLAS (strided batched):\n");
  fmt::print("{:>3} {:>11} {:>11} {:>14}\n", "g", "tiled", "cublas", "tiled/cublas");
  const kernels::CudaGemm previous = kernels::cuda_gemm();
  for (std::int64_t g : {2, 4, 8}) {
    const Problem p = make_problem(o.rows, o.in, o.out, g, device);
    kernels::set_cuda_gemm(kernels::CudaGemm::Tiled);
    const double tt = best_seconds(train_step(p, grouped_forward), device, o.runs);
    kernels::set_cuda_gemm(kernels::CudaGemm::Cublas);
    const double tb = best_seconds(train_step(p, grouped_forward), device, o.runs);
    fmt::print("{:>3} {:>9.3f}ms {:>9.3f}ms {:>13.2f}x\n", g, tt * 1e3, tb * 1e3, tt / tb);
  }
  kernels::set_cuda_gemm(previous);
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--device" && has_value) o.device = argv[++i];
    else if (a == "--rows" && has_value) o.rows = std::atoll(argv[++i]);
    else if (a == "--in" && has_value) o.in = std::atoll(argv[++i]);
    else if (a == "--out" && has_value) o.out = std::atoll(argv[++i]);
    else if (a == "--runs" && has_value) o.runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && has_value) o.threads = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr,
                 "usage: grouped_linear_bench [--device cpu|emu|cuda] [--rows T] [--in N] [--out N] [--runs N] "
                 "[--threads N]\n");
      return 2;
    }
  }
  try {
    const kernels::DeviceAvailability avail = kernels::register_devices();
    const Device device = Device::parse(o.device);
    const bool emu = device.is_emu();
    if (o.rows == 0) o.rows = emu ? 256 : 4096;
    if (o.in == 0) o.in = emu ? 128 : 512;
    if (o.out == 0) o.out = emu ? 256 : 1024;
    if (o.in % 8 != 0 || o.out % 8 != 0) fail("grouped_linear_bench", "--in and --out must be multiples of 8");
    if (device.is_cuda() && avail.cuda_devices == 0) fail("grouped_linear_bench", "no GPU here");
    omp_set_num_threads(o.threads);
    fmt::print("grouped_linear forward (fwd) and forward + backward (f+b) on {}, float32, T = {} rows, {} -> {} "
               "features,\n{} CPU threads, best of {}; ratio = composed / grouped\n\n",
               device.str(), o.rows, o.in, o.out, o.threads, o.runs);
    bench_against_composition(o, device);
    if (emu) {
      fmt::print("\nemulated device against the fast CPU path, grouped_linear f+b on the same size "
                 "(emulator times say nothing about GPU speed):\n");
      bench_emulator_cost(o);
    }
    if (device.is_cuda()) bench_tiled_vs_cublas(o, device);
  } catch (const Error& e) {
    fmt::print(stderr, "grouped_linear_bench: {}\n", e.what());
    return 2;
  }
  return 0;
}
