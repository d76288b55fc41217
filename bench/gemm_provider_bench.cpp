// Does the automatic CPU GEMM provider choice (kernels/cpu/gemm_provider.h) pick the fastest
// library on this machine? For the GEMM shapes the shipped models run, it times define's gemm with
// each provider the build has forced (Eigen, OpenBLAS, oneDNN), interleaved in the same process on
// the same operands with the run's thread count, and prints which provider auto chose for the
// shape's class and whether that is the fastest one here.
//   gemm_provider_bench [threads] [rounds]     (defaults: 2 threads, 7 rounds)
// "right" means auto's provider is the fastest one or within 5% of it (closer than this VM's
// run-to-run noise). Auto decides from a timing of the class's first shape, scaled down, so a
// shape can disagree where the libraries' packing or threading differs with the size.
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
#include "kernels/cpu/matmul.h"
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
  std::vector<GemmChoice> forced{GemmChoice::Eigen};
  if (kernels::cpu::openblas_available()) forced.push_back(GemmChoice::OpenBlas);
  if (kernels::cpu::onednn_available()) forced.push_back(GemmChoice::OneDnn);
  if (forced.size() == 1) {
    fmt::print(stderr, "gemm_provider_bench: this build has neither OpenBLAS nor oneDNN, so there is nothing to choose\n");
    return 2;
  }
  const std::size_t count = forced.size();
  omp_set_num_threads(threads);
  NoGradGuard no_grad;
  const kernels::cpu::GemmProviderSettings settings = kernels::cpu::gemm_provider_settings();
  fmt::print("CPU GEMM provider per shape, float32, {} threads, best of {} interleaved rounds; auto's choices "
             "from {}\n\n",
             threads, rounds,
             settings.cache_dir ? kernels::cpu::gemm_cache_folder() : std::string("this process (no cache)"));
  fmt::print("{:<62}", "shape");
  for (const GemmChoice c : forced) fmt::print(" {:>10}", kernels::cpu::to_string(c));
  fmt::print(" {:>9} {:>9} {:>6}\n", "fastest", "auto", "right");
  int right = 0, total = 0;
  double auto_time = 0, best_time = 0;
  std::vector<double> alone(count, 0.0);
  Generator gen(3);
  for (const Case& c : kCases) {
    const Shape sa = c.trans_a ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k};
    const Shape sb = c.trans_b ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n};
    const Tensor a = rand_uniform(sa, -1, 1, {}, gen), b = rand_uniform(sb, -1, 1, {}, gen);
    const Tensor out = empty({c.batch, c.m, c.n});
    const auto run = [&] { kernels::gemm(a, b, out, c.trans_a, c.trans_b, 1.0, 0.0); };
    // Auto's choice for the class, made (or read) under the run's own settings.
    // Run as matmul runs it: a batch in parallel is many serial GEMMs (kernels/cpu/matmul.cpp).
    const kernels::cpu::GemmRun how = kernels::cpu::gemm_batch_parallel(c.batch, c.m * c.n * c.k, threads)
                                          ? kernels::cpu::GemmRun::Serial
                                          : kernels::cpu::GemmRun::Threaded;
    const GemmProvider chosen = kernels::cpu::gemm_provider(c.m, c.n, c.k, false, how, {c.trans_a, c.trans_b});
    std::vector<double> best(count, std::numeric_limits<double>::infinity());
    for (const GemmChoice f : forced) {  // warm-up each
      kernels::cpu::set_gemm_provider_settings({f, std::nullopt});
      run();
    }
    for (int r = 0; r < rounds; ++r)
      for (std::size_t p = 0; p < count; ++p) {
        kernels::cpu::set_gemm_provider_settings({forced[p], std::nullopt});
        best[p] = std::min(best[p], seconds(run));
      }
    kernels::cpu::set_gemm_provider_settings(settings);
    // Re-read (the settings reset forgot it).
    (void)kernels::cpu::gemm_provider(c.m, c.n, c.k, false, how, {c.trans_a, c.trans_b});
    const std::size_t fastest = static_cast<std::size_t>(std::min_element(best.begin(), best.end()) - best.begin());
    std::size_t chosen_index = 0;
    for (std::size_t p = 0; p < count; ++p)
      if (std::string(kernels::cpu::to_string(forced[p])) == kernels::cpu::to_string(chosen)) chosen_index = p;
    const double t_auto = best[chosen_index], t_best = best[fastest];
    const bool ok = t_auto <= 1.05 * t_best;
    right += ok;
    ++total;
    auto_time += t_auto;
    for (std::size_t p = 0; p < count; ++p) alone[p] += best[p];
    best_time += t_best;
    fmt::print("{:<62}", c.where);
    for (const double t : best) fmt::print(" {:>8.3f}ms", t * 1e3);
    fmt::print(" {:>9} {:>9} {:>6}\n", kernels::cpu::to_string(forced[fastest]), kernels::cpu::to_string(chosen),
               ok ? "yes" : "NO");
  }
  fmt::print("\nauto right on {} of {} shapes; summed over the shapes: auto {:.2f} ms, the fastest each time {:.2f} ms",
             right, total, auto_time * 1e3, best_time * 1e3);
  for (std::size_t p = 0; p < count; ++p)
    fmt::print(", {} alone {:.2f} ms", kernels::cpu::to_string(forced[p]), alone[p] * 1e3);
  fmt::print("\n");
  return 0;
}
