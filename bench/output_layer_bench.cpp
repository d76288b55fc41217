// The output layer with its loss as one fused op (linear_cross_entropy, kernels/cpu/
// linear_cross_entropy.h) against what it replaces, cross_entropy(linear(x, W, b), target), and
// against the GEMMs alone: forward, and forward + backward (dx, dW, db), float32, on the CPU.
// The GEMM line is what the layer's three products (forward, dx, dW: the same FLOPs each) cost
// at the rate define's GEMM reaches on the forward product alone, writing all of C to memory; a
// fused op near or under it spends next to nothing outside its GEMMs.
//
//   output_layer_bench [--rows 700] [--in 200] [--classes 10000] [--threads 2] [--rounds 6]
//
// Rounds: each variant runs best-of-3 per round, the rounds interleaved, and the best of the
// rounds is kept: on the 2-core build VM one timing swings by 10-20% with other tenants' load,
// and interleaving keeps such swings from favouring one variant. Defaults: the PTB LSTM's layer
// (lm_train_bench: 20 x 35 rows, 200 features, 10,000 words); the Multi30k translation model's
// is --rows 4096 --in 256 --classes 8000.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/cpu_info.h"
#include "core/factory.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/gemm_provider.h"

DEFINE_BENCH_FAMILY("softmax");

using namespace define;

int main(int argc, char** argv) try {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  std::int64_t rows = 700, in = 200, classes = 10000, threads = 2, rounds = 6;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
    const std::int64_t v = bench::option_int(k, argv[++i]);
    if (k == "--rows") rows = v;
    else if (k == "--in") in = v;
    else if (k == "--classes") classes = v;
    else if (k == "--threads") threads = v;
    else if (k == "--rounds") rounds = v;
    else throw std::runtime_error("unknown option " + k);
  }
  if (rows < 1 || in < 1 || classes < 1 || threads < 1 || rounds < 1)
    throw std::runtime_error("--rows, --in, --classes, --threads and --rounds must be positive");
  omp_set_num_threads(static_cast<int>(threads));
  kernels::cpu::flush_denormals(true);
  Generator gen(1);
  Tensor x = rand_normal({rows, in}, 0, 1, {}, gen), w = rand_normal({classes, in}, 0, 0.1, {}, gen);
  Tensor b = rand_normal({classes}, 0, 0.1, {}, gen);
  const Tensor target = rand_int({rows}, classes, {.dtype = DType::Int64}, gen);
  const Tensor xd = x.alias(), wt = transpose(w, 0, 1);
  x.set_requires_grad();
  w.set_requires_grad();
  b.set_requires_grad();

  auto composed = [&] { return cross_entropy(linear(x, w, b), target); };
  auto fused = [&] { return linear_cross_entropy(x, w, b, target); };
  double composed_fwd = 1e30, composed_both = 1e30, fused_fwd = 1e30, fused_both = 1e30, gemm = 1e30;
  for (std::int64_t r = 0; r < rounds; ++r) {
    composed_both = std::min(composed_both, bench::best_seconds([&] { backward(composed()); }, Device::cpu(), 3));
    fused_both = std::min(fused_both, bench::best_seconds([&] { backward(fused()); }, Device::cpu(), 3));
    NoGradGuard no_grad;
    composed_fwd = std::min(composed_fwd, bench::best_seconds([&] { (void)composed(); }, Device::cpu(), 3));
    fused_fwd = std::min(fused_fwd, bench::best_seconds([&] { (void)fused(); }, Device::cpu(), 3));
    gemm = std::min(gemm, bench::best_seconds([&] { (void)matmul(xd, wt); }, Device::cpu(), 3));
  }
  const double flops = 2.0 * double(rows) * double(in) * double(classes);
  fmt::print("output layer + cross entropy, {} rows x {} features -> {} classes, float32, {} threads, {}\n", rows, in,
             classes, threads, cpuinfo_field("model name", "unknown CPU"));
  fmt::print("forward           : composed {:8.2f} ms, fused {:8.2f} ms, ratio {:.2f}x; one GEMM {:8.2f} ms ({:.0f} GFLOP/s)\n",
             composed_fwd * 1e3, fused_fwd * 1e3, composed_fwd / fused_fwd, gemm * 1e3, flops / gemm / 1e9);
  fmt::print("forward + backward: composed {:8.2f} ms, fused {:8.2f} ms, ratio {:.2f}x; three GEMMs {:8.2f} ms "
             "(the fused op takes {:.0f}% of their time)\n",
             composed_both * 1e3, fused_both * 1e3, composed_both / fused_both, 3 * gemm * 1e3,
             100 * fused_both / (3 * gemm));
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 2;
}
