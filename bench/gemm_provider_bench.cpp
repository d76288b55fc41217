// Does the automatic CPU GEMM provider choice (kernels/cpu/gemm_provider.h) pick the faster
// library on this machine? For the GEMM shapes the shipped models run, it times define's gemm with
// each provider forced (Eigen, OpenBLAS), interleaved in the same process on the same operands with
// the run's thread count, and prints which provider auto chose for the shape's class and whether
// that is the faster one here.
//   gemm_provider_bench [threads] [rounds]     (defaults: 2 threads, 7 rounds)
// "right" means auto's provider is the faster one or within 5% of it (closer than this VM's
// run-to-run noise). Auto decides from a one-thread timing of the class's first shape, so a
// threaded or transposed shape can disagree where the libraries' threading or packing differs.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/matmul.h"

DEFINE_BENCH_FAMILY("matmul");

namespace {

using namespace define;
using kernels::cpu::GemmChoice;
using kernels::cpu::GemmProvider;

struct Case {
  const char* where;
  std::int64_t batch, m, n, k;
  bool trans_a, trans_b;
};

// The models' GEMMs (forward and the two backward products), rows = batch positions.
const Case kCases[] = {
    {"LSTM LM (lm_train_bench): output layer, 700 x 200 -> 10000", 1, 700, 10000, 200, false, true},
    {"LSTM LM: output layer's dW (10000 x 700 x 200)", 1, 10000, 200, 700, true, false},
    {"LSTM LM: input projection, 700 x 200 -> 800", 1, 700, 800, 200, false, true},
    {"DeFINE unit layer 1, per group 360 x 16 -> 32 (g 8)", 8, 360, 32, 16, false, false},
    {"DeFINE unit layer 2, per group 360 x 96 -> 96 (g 4)", 4, 360, 96, 96, false, false},
    {"DeFINE unit layer 3, per group 360 x 256 -> 256 (g 2)", 2, 360, 256, 256, false, false},
    {"DeFINE unit reduce, 360 x 640 -> 256", 1, 360, 256, 640, false, true},
    {"Transformer-XL: qkv, 1024 x 256 -> 768", 1, 1024, 768, 256, false, true},
    {"Transformer-XL: FFN, 1024 x 256 -> 1024", 1, 1024, 1024, 256, false, true},
    {"Transformer-XL: FFN dW (1024 x 1024 x 256)", 1, 1024, 256, 1024, true, false},
    {"Transformer-XL: scores per head, 64 x 64 . 128 (128 heads)", 128, 64, 128, 64, false, true},
    {"Translation: output layer, 4096 x 256 -> 8000", 1, 4096, 8000, 256, false, true},
    {"square 1024^3", 1, 1024, 1024, 1024, false, false},
};

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  if (!kernels::cpu::openblas_available()) {
    fmt::print(stderr, "gemm_provider_bench: this build has no OpenBLAS, so there is nothing to choose\n");
    return 2;
  }
  omp_set_num_threads(threads);
  NoGradGuard no_grad;
  const kernels::cpu::GemmProviderSettings settings = kernels::cpu::gemm_provider_settings();
  fmt::print("CPU GEMM provider per shape, float32, {} threads, best of {} interleaved rounds; auto's choices "
             "from {}\n\n",
             threads, rounds,
             settings.cache_dir ? kernels::cpu::gemm_cache_folder() : std::string("this process (no cache)"));
  fmt::print("{:<62} {:>10} {:>10} {:>9} {:>9} {:>6}\n", "shape", "Eigen", "OpenBLAS", "faster", "auto", "right");
  int right = 0, total = 0;
  double auto_time = 0, eigen_time = 0, best_time = 0;
  Generator gen(3);
  for (const Case& c : kCases) {
    const Shape sa = c.trans_a ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k};
    const Shape sb = c.trans_b ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n};
    const Tensor a = rand_uniform(sa, -1, 1, {}, gen), b = rand_uniform(sb, -1, 1, {}, gen);
    const Tensor out = empty({c.batch, c.m, c.n});
    const auto run = [&] { kernels::gemm(a, b, out, c.trans_a, c.trans_b, 1.0, 0.0); };
    // Auto's choice for the class, made (or read) under the run's own settings.
    const GemmProvider chosen = kernels::cpu::gemm_provider(c.m, c.n, c.k, false);
    double best[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    const GemmChoice forced[2] = {GemmChoice::Eigen, GemmChoice::OpenBlas};
    for (int p = 0; p < 2; ++p) {  // warm-up each
      kernels::cpu::set_gemm_provider_settings({forced[p], std::nullopt});
      run();
    }
    for (int r = 0; r < rounds; ++r)
      for (int p = 0; p < 2; ++p) {
        kernels::cpu::set_gemm_provider_settings({forced[p], std::nullopt});
        best[p] = std::min(best[p], seconds(run));
      }
    kernels::cpu::set_gemm_provider_settings(settings);
    (void)kernels::cpu::gemm_provider(c.m, c.n, c.k, false);  // re-read (the settings reset forgot it)
    const GemmProvider faster = best[1] < best[0] ? GemmProvider::OpenBlas : GemmProvider::Eigen;
    const double t_auto = best[chosen == GemmProvider::OpenBlas ? 1 : 0], t_best = std::min(best[0], best[1]);
    const bool ok = t_auto <= 1.05 * t_best;
    right += ok;
    ++total;
    auto_time += t_auto;
    eigen_time += best[0];
    best_time += t_best;
    fmt::print("{:<62} {:>8.3f}ms {:>8.3f}ms {:>9} {:>9} {:>6}\n", c.where, best[0] * 1e3, best[1] * 1e3,
               kernels::cpu::to_string(faster), kernels::cpu::to_string(chosen), ok ? "yes" : "NO");
  }
  fmt::print("\nauto right on {} of {} shapes; summed over the shapes: auto {:.2f} ms, Eigen alone {:.2f} ms, "
             "the faster of the two each time {:.2f} ms\n",
             right, total, auto_time * 1e3, eigen_time * 1e3, best_time * 1e3);
  return 0;
}
