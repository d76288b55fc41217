// CPU float32 GEMM throughput: define::matmul (Eigen underneath) next to OpenBLAS sgemm in the
// same process, on the same inputs, with the same thread count. Best of 5 timed runs after a
// warm-up. Also times a batch of small GEMMs through define::bmm, and both problems on one
// thread, which is what the threading policy in kernels/cpu/matmul.cpp was chosen from.
//   gemm_bench [n] [threads]     (defaults: n = 1024, threads = 2)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/matmul.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"

DEFINE_BENCH_FAMILY("matmul");

namespace {

using define::bench::best_seconds;

double gflops(double flops, double seconds) { return flops / seconds * 1e-9; }

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  using namespace define;
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  NoGradGuard no_grad;

  const Tensor a = rand_uniform({n, n}, -1, 1), b = rand_uniform({n, n}, -1, 1);
  Tensor c = empty({n, n});
  const double flops = 2.0 * n * n * n;

  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  const double t_define = best_seconds([&] { c = matmul(a, b); });
  const double t_blas = best_seconds([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.0f, a.data<float>(), static_cast<int>(n), b.data<float>(), static_cast<int>(n),
                0.0f, c.data<float>(), static_cast<int>(n));
  });
  fmt::print("sgemm {0}x{0}x{0}, {1} threads, best of 5\n", n, threads);
  fmt::print("  define::matmul   {:8.1f} GFLOP/s  ({:.2f} ms)\n", gflops(flops, t_define), t_define * 1e3);
  fmt::print("  OpenBLAS sgemm   {:8.1f} GFLOP/s  ({:.2f} ms)\n", gflops(flops, t_blas), t_blas * 1e3);
  fmt::print("  define / OpenBLAS = {:.2f}\n", t_blas / t_define);

  // A batch of 64 small GEMMs: the parallel batch loop against one thread.
  const std::int64_t batch = 64, s = 32;
  const Tensor sa = rand_uniform({batch, s, s}, -1, 1), sb = rand_uniform({batch, s, s}, -1, 1);
  const double small_flops = 2.0 * batch * s * s * s;
  const double t_small = best_seconds([&] { c = bmm(sa, sb); });

  omp_set_num_threads(1);
  const double t_define_1 = best_seconds([&] { c = matmul(a, b); });
  const double t_small_1 = best_seconds([&] { c = bmm(sa, sb); });
  omp_set_num_threads(threads);

  fmt::print("bmm {}x({}x{}x{}), best of 5\n", batch, s, s, s);
  fmt::print("  {} threads        {:8.1f} GFLOP/s  ({:.3f} ms)\n", threads, gflops(small_flops, t_small), t_small * 1e3);
  fmt::print("  1 thread         {:8.1f} GFLOP/s  ({:.3f} ms)\n", gflops(small_flops, t_small_1), t_small_1 * 1e3);
  fmt::print("define::matmul {0}x{0}x{0} on 1 thread: {1:.1f} GFLOP/s ({2:.2f}x slower than {3} threads)\n", n,
             gflops(flops, t_define_1), t_define_1 / t_define, threads);
  return 0;
}
