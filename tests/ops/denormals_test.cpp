// kernels/cpu/denormals.h: flushing reaches every OpenMP thread, makes denormal results and inputs zero,
// and can be undone.
#include <catch2/catch.hpp>
#include <omp.h>

#include <vector>

#include "kernels/cpu/denormals.h"

namespace {

// 1e-30 * 1e-10 is 1e-40, a denormal float; with flushing on it is 0. The volatile operands keep
// the compiler from folding the product at compile time (the mode only acts at run time).
float denormal_product() {
  volatile float a = 1e-30f, b = 1e-10f;
  return a * b;
}

// A denormal input times 1: kept as is without flushing, read as 0 with it.
float denormal_input_times_one() {
  volatile float d = 1e-40f, one = 1.0f;
  return d * one;
}

struct ThreadView {
  bool flushed;
  float product, input;
};

std::vector<ThreadView> every_thread() {
  std::vector<ThreadView> seen(static_cast<std::size_t>(omp_get_max_threads()));
#pragma omp parallel
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    if (t < seen.size()) seen[t] = {define::kernels::cpu::denormals_flushed(), denormal_product(), denormal_input_times_one()};
  }
  return seen;
}

}  // namespace

TEST_CASE("denormals: flushing on every OpenMP thread, and off again", "[kernels][denormals]") {
#if defined(__x86_64__) || defined(__i386__)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(4);  // workers beyond those of earlier regions too
  define::kernels::cpu::flush_denormals(true);
  CHECK(define::kernels::cpu::denormals_flushed());
  for (const ThreadView& v : every_thread()) {
    CHECK(v.flushed);
    CHECK(v.product == 0.0f);
    CHECK(v.input == 0.0f);
  }
  define::kernels::cpu::flush_denormals(false);
  CHECK_FALSE(define::kernels::cpu::denormals_flushed());
  for (const ThreadView& v : every_thread()) {
    CHECK_FALSE(v.flushed);
    CHECK(v.product > 0.0f);
    CHECK(v.input == 1e-40f);
  }
  omp_set_num_threads(threads);
#else
  define::kernels::cpu::flush_denormals(true);
  CHECK_FALSE(define::kernels::cpu::denormals_flushed());  // no such mode here: a no-op
#endif
}
