// CUDA grouped-linear kernels (kernels/cuda/grouped_linear.cu) on the emulated device: larger
// shapes than the op harness runs, against the CPU reference (float32 and float64); results
// bit-identical under the emulator's forward, reverse and random thread schedules; gradients
// that do not depend on which of them are requested; the emulated device's default (the tiled
// kernels) and the cuBLAS path when selected, on the emulated cuBLAS.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/factory.h"
#include "support/emulated_device.h"
#include "kernels/cuda/matmul_config.h"
#include "cuda_emu/emu_cublas.hpp"
#include "kernels/grouped_linear.h"

using namespace define;
using define::test::check_close;
using define::test::check_identical;
using define::test::on_cpu_backend;
using test::kernel_test_device;
using test::to_test_device;

namespace {

struct Problem {
  Tensor x, w, b, dy;
};

// x [rows, g*k_in], weight [g, k_in, k_out], bias [g, k_out], dy [rows, g*k_out] on the CPU.
Problem make_problem(std::int64_t rows, std::int64_t g, std::int64_t k_in, std::int64_t k_out, DType dtype,
                     std::uint64_t seed) {
  Generator gen(seed);
  Problem p;
  p.x = rand_uniform({rows, g * k_in}, -1, 1, {dtype}, gen);
  p.w = rand_uniform({g, k_in, k_out}, -1, 1, {dtype}, gen);
  p.b = rand_uniform({g, k_out}, -1, 1, {dtype}, gen);
  p.dy = rand_uniform({rows, g * k_out}, -1, 1, {dtype}, gen);
  return p;
}

Problem on_emu(const Problem& p) {
  return {to_test_device(p.x), to_test_device(p.w), to_test_device(p.b), to_test_device(p.dy)};
}

// Everything one forward and one backward call produce.
struct Results {
  Tensor y, dx, dweight, dbias;
};

// On the tensors' device; CPU tensors go to the double-accumulating reference.
Results run(const Problem& p, bool bias = true) {
  kernels::CpuBackendGuard ref(kernels::Backend::Ref);
  const kernels::GroupedLinearGrads g = kernels::grouped_linear_backward(p.dy, p.x, p.w, true, true, true);
  return {kernels::grouped_linear(p.x, p.w, bias ? p.b : Tensor()), g.dx, g.dweight, g.dbias};
}

void check_all_close(const Results& got, const Results& ref, double atol, double rtol) {
  check_close(got.y, ref.y, atol, rtol, "y");
  check_close(got.dx, ref.dx, atol, rtol, "dx");
  check_close(got.dweight, ref.dweight, atol, rtol, "dweight");
  check_close(got.dbias, ref.dbias, atol, rtol, "dbias");
}

void check_all_identical(const Results& got, const Results& ref, const std::string& what) {
  check_identical(got.y, ref.y, what + ": y");
  check_identical(got.dx, ref.dx, what + ": dx");
  check_identical(got.dweight, ref.dweight, what + ": dweight");
  check_identical(got.dbias, ref.dbias, what + ": dbias");
}

// Runs p under the emulator's forward, reverse, random and racing block schedules, requires the
// same bits from each, and returns the first run's results.
Results identical_under_schedules(const Problem& p) {
  Results first;
  for (const std::string s : {"forward", "reverse", "random:4242", "race:7"}) {
    kernels::EmuScheduleGuard schedule(s);
    const Results got = run(p);
    if (!first.y.defined()) first = got;
    else check_all_identical(got, first, "schedule " + s);
  }
  return first;
}

}  // namespace

TEST_CASE("cuda grouped_linear: [512, 8*64] -> [512, 8*32] matches the reference",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  SECTION("float32") {
    // dweight sums 512 products per element in float32: a little more room than the harness's 1e-5.
    const Problem p = make_problem(512, 8, 64, 32, DType::Float32, 1);
    check_all_close(run(on_emu(p)), run(p), 2e-5, 1e-5);
  }
  SECTION("float32 without bias") {
    const Problem p = make_problem(512, 8, 64, 32, DType::Float32, 2);
    check_all_close(run(on_emu(p), false), run(p, false), 2e-5, 1e-5);
  }
  SECTION("float64, partial tiles everywhere") {
    const Problem p = make_problem(257, 3, 65, 33, DType::Float64, 3);
    check_all_close(run(on_emu(p)), run(p), 1e-12, 1e-12);
  }
}

TEST_CASE("cuda grouped_linear: dweight split over the rows matches the reference",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  // 2 groups of 20 x 24 are 2 output tiles, far below the split target, and 1,000 rows allow 3
  // chunks of at least 256: chunks of 336 rows (21 slices), the last 328 rows (a partial slice).
  // A chunk reading the wrong rows, or partials summed short, shows here as a wrong dweight.
  SECTION("float64") {
    const Problem p = make_problem(1000, 2, 20, 24, DType::Float64, 12);
    check_all_close(run(on_emu(p)), run(p), 1e-12, 1e-12);
  }
  SECTION("float32") {
    const Problem p = make_problem(1000, 2, 20, 24, DType::Float32, 13);
    check_all_close(run(on_emu(p)), run(p), 3e-5, 1e-5);
  }
  SECTION("bit-identical under every thread schedule") {
    (void)identical_under_schedules(on_emu(make_problem(1000, 2, 20, 24, DType::Float32, 14)));
  }
  SECTION("float16 and bfloat16: the chunks' partials add up in float, rounded once") {
    // The reference widens, sums 1,000 products in float64 and rounds once; the kernel sums each
    // chunk in float, adds the float partials and rounds once: within 2 ulps of the format.
    for (const DType dt : {DType::Float16, DType::BFloat16}) {
      INFO(dtype_name(dt));
      const Problem p = make_problem(1000, 2, 20, 24, dt, 15);
      const double eps = dt == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
      const Results got = run(on_emu(p)), want = run(p);
      REQUIRE(got.dweight.dtype() == dt);
      check_all_close(got, want, 2 * eps, 2 * eps);
      (void)identical_under_schedules(on_emu(p));
    }
  }
}

TEST_CASE("cuda grouped_linear: results are bit-identical under every thread schedule",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  // 130 rows (3 row tiles, the last partial), 65 outputs per group (2 column tiles), depths 33
  // (forward), 65 (dx) and 130 (dweight), each ending in a partial 16-deep slice.
  const Problem p = on_emu(make_problem(130, 2, 33, 65, DType::Float32, 4));
  const Results first = identical_under_schedules(p);
  // And every result repeats exactly on a second call (no atomics anywhere).
  check_all_identical(run(p), first, "repeated call");
}

TEST_CASE("cuda grouped_linear: gradients do not depend on which are requested",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  const Problem p = on_emu(make_problem(70, 4, 9, 20, DType::Float32, 5));
  const kernels::GroupedLinearGrads all = kernels::grouped_linear_backward(p.dy, p.x, p.w, true, true, true);
  const kernels::GroupedLinearGrads only_dx = kernels::grouped_linear_backward(p.dy, Tensor(), p.w, true, false, false);
  const kernels::GroupedLinearGrads only_dw = kernels::grouped_linear_backward(p.dy, p.x, p.w, false, true, false);
  const kernels::GroupedLinearGrads only_db = kernels::grouped_linear_backward(p.dy, Tensor(), p.w, false, false, true);
  CHECK_FALSE(only_dx.dweight.defined());
  CHECK_FALSE(only_dx.dbias.defined());
  CHECK_FALSE(only_dw.dx.defined());
  CHECK_FALSE(only_db.dweight.defined());
  check_identical(only_dx.dx, all.dx, "dx alone");
  check_identical(only_dw.dweight, all.dweight, "dweight alone");
  check_identical(only_db.dbias, all.dbias, "dbias alone");
}

TEST_CASE("cuda grouped_linear: 3-d and non-contiguous inputs on the device",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(6);
  const Tensor x = rand_uniform({4, 33, 4 * 17}, -1, 1, {}, gen);
  const Tensor w = rand_uniform({4, 17, 9}, -1, 1, {}, gen);
  const Tensor dy = rand_uniform({4, 33, 4 * 9}, -1, 1, {}, gen);
  // x stored with its first two dims swapped: a non-contiguous view with x's values.
  const Tensor base = to_test_device(kernels::contiguous(x.as_strided({33, 4, 4 * 17}, {4 * 17, 33 * 4 * 17, 1}, 0)));
  const Tensor x_view = base.as_strided({4, 33, 4 * 17}, {4 * 17, 4 * 4 * 17, 1}, 0);
  REQUIRE_FALSE(x_view.is_contiguous());
  check_identical(x_view, x, "the view holds x's values");
  const Tensor w_emu = to_test_device(w), dy_emu = to_test_device(dy);
  const auto ref = [&](const std::function<Tensor()>& f) { return on_cpu_backend(kernels::Backend::Ref, f); };
  check_close(kernels::grouped_linear(x_view, w_emu, Tensor()),
              ref([&] { return kernels::grouped_linear(x, w, Tensor()); }), 1e-5, 1e-5, "y");
  const kernels::GroupedLinearGrads g = kernels::grouped_linear_backward(dy_emu, x_view, w_emu, true, true, false);
  CHECK(g.dx.shape() == Shape{4, 33, 4 * 17});
  check_close(g.dx, ref([&] { return kernels::grouped_linear_backward(dy, x, w, true, false, false).dx; }), 1e-5, 1e-5,
              "dx");
  check_close(g.dweight, ref([&] { return kernels::grouped_linear_backward(dy, x, w, false, true, false).dweight; }),
              1e-5, 1e-5, "dweight");
}

TEST_CASE("cuda grouped_linear: the emulated device defaults to the tiled kernel",
          "[cuda][grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  const Problem p = on_emu(make_problem(40, 2, 7, 11, DType::Float32, 7));
  Results tiled, by_default;
  {
    const kernels::CudaGemmGuard selected(kernels::CudaGemm::Tiled);
    tiled = run(p);
  }
  const ::cuda_emu::CublasCalls before = ::cuda_emu::cublas_calls();
  {
    const kernels::CudaGemmGuard selected(kernels::CudaGemm::Default);
    by_default = run(p);
  }
  CHECK(::cuda_emu::cublas_calls().gemm_strided_batched == before.gemm_strided_batched);
  CHECK(::cuda_emu::cublas_calls().gemm == before.gemm);
  check_all_identical(by_default, tiled, "default");
}

TEST_CASE("cuda grouped_linear: the cuBLAS path (emulated cuBLAS) matches the reference",
          "[cuda][grouped_linear][cublas][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  const kernels::CudaGemmGuard cublas(kernels::CudaGemm::Cublas);
  // Every GEMM is one cuBLAS call over the group views (cublas<t>gemmStridedBatched, or
  // cublas<t>gemm for a single group): forward 1, backward 2 (dx and dweight).
  const auto check = [](const Problem& p, bool bias, double tol) {
    const ::cuda_emu::CublasCalls before = ::cuda_emu::cublas_calls();
    check_all_close(run(on_emu(p), bias), run(p, bias), tol, tol);
    const bool one_group = p.w.shape()[0] == 1;
    if (!kernel_test_device().is_emu()) return;  // only the emulated cuBLAS counts its calls
    CHECK(::cuda_emu::cublas_calls().gemm_strided_batched - before.gemm_strided_batched == (one_group ? 0 : 3));
    CHECK(::cuda_emu::cublas_calls().gemm - before.gemm == (one_group ? 3 : 0));
  };
  SECTION("float32, k_in != k_out") { check(make_problem(130, 4, 33, 17, DType::Float32, 8), true, 1e-5); }
  SECTION("float32 without bias") { check(make_problem(70, 3, 9, 20, DType::Float32, 9), false, 1e-5); }
  SECTION("float64, one group, one row") { check(make_problem(1, 1, 65, 33, DType::Float64, 10), true, 1e-12); }
  SECTION("float64, partial sizes") { check(make_problem(257, 3, 65, 33, DType::Float64, 11), true, 1e-12); }
}
