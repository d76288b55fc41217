// CUDA layer-norm kernels (kernels/cuda/layer_norm.cu) on the emulated device: larger shapes than
// the op harness runs, against the CPU reference; results bit-identical under the emulator's
// forward, reverse and random thread schedules; deterministic parameter gradients.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "core/float16.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/layer_norm.h"
#include "support/common.h"
#include "support/emulated_device.h"

using namespace define;
using test::kernel_test_device;
using test::check_close;
using test::to_test_device;

namespace {

Tensor on_emu(const Tensor& t) { return t.defined() ? copy_to_device(t, kernel_test_device()) : t; }

using define::test::values;

// Everything one forward and one backward pass produce.
struct LayerNormRun {
  std::vector<double> y, mean, rstd, dx, dweight, dbias;
};

// Forward and backward of layer_norm on the tensors' device (the CPU reference for CPU tensors),
// with every gradient requested (dweight and dbias also without weight and bias).
LayerNormRun run_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy, double eps) {
  kernels::CpuBackendGuard ref(kernels::Backend::Ref);
  const kernels::LayerNormOutputs f = kernels::layer_norm(x, w, b, eps);
  const kernels::LayerNormGrads g = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
  return {values(f.y), values(f.mean), values(f.rstd), values(g.dx), values(g.dweight), values(g.dbias)};
}

void check_runs_close(const LayerNormRun& got, const LayerNormRun& ref, double atol, double rtol) {
  check_close(got.y, ref.y, atol, rtol, "y");
  check_close(got.mean, ref.mean, atol, rtol, "mean");
  check_close(got.rstd, ref.rstd, atol, rtol, "rstd");
  check_close(got.dx, ref.dx, atol, rtol, "dx");
  check_close(got.dweight, ref.dweight, atol, rtol, "dweight");
  check_close(got.dbias, ref.dbias, atol, rtol, "dbias");
}

void check_identical(const LayerNormRun& got, const LayerNormRun& ref) {
  CHECK(got.y == ref.y);
  CHECK(got.mean == ref.mean);
  CHECK(got.rstd == ref.rstd);
  CHECK(got.dx == ref.dx);
  CHECK(got.dweight == ref.dweight);
  CHECK(got.dbias == ref.dbias);
}

struct Problem {
  Tensor x, w, b, dy;
};

Problem make_problem(std::int64_t rows, std::int64_t cols, DType dtype, std::uint64_t seed, double x_lo = -2,
                     double x_hi = 2) {
  Generator gen(seed);
  Problem p;
  p.x = rand_uniform({rows, cols}, x_lo, x_hi, {dtype}, gen);
  p.w = rand_uniform({cols}, 0.5, 1.5, {dtype}, gen);
  p.b = rand_uniform({cols}, -1, 1, {dtype}, gen);
  p.dy = rand_uniform({rows, cols}, -1, 1, {dtype}, gen);
  return p;
}

LayerNormRun run_on_emu(const Problem& p, double eps = 1e-5) {
  return run_layer_norm(on_emu(p.x), on_emu(p.w), on_emu(p.b), on_emu(p.dy), eps);
}

}  // namespace

TEST_CASE("cuda layer_norm: [257, 1031] forward and backward match the reference",
          "[cuda][layer_norm][family:layer_norm]") {
  REQUIRE(kernels::register_devices().emu);
  SECTION("float32, one block per row") {
    const Problem p = make_problem(257, 1031, DType::Float32, 1);
    check_runs_close(run_on_emu(p), run_layer_norm(p.x, p.w, p.b, p.dy, 1e-5), 1e-5, 1e-5);
  }
  SECTION("float64") {
    const Problem p = make_problem(257, 1031, DType::Float64, 2);
    check_runs_close(run_on_emu(p), run_layer_norm(p.x, p.w, p.b, p.dy, 1e-5), 1e-12, 1e-12);
  }
  SECTION("float32, one warp per row, without weight and bias") {
    const Problem p = make_problem(257, 1000, DType::Float32, 3);
    check_runs_close(run_layer_norm(on_emu(p.x), Tensor(), Tensor(), on_emu(p.dy), 1e-5),
                     run_layer_norm(p.x, Tensor(), Tensor(), p.dy, 1e-5), 1e-5, 1e-5);
  }
}

TEST_CASE("cuda layer_norm: statistics stay accurate when |mean| >> std", "[cuda][layer_norm][family:layer_norm]") {
  REQUIRE(kernels::register_devices().emu);
  // Rows around 1000 with spread 1: a one-pass E[x^2] - E[x]^2 in float32 would lose every digit.
  for (std::int64_t cols : {300, 2000}) {  // one warp per row, one block per row
    INFO("cols " << cols);
    const Problem p = make_problem(64, cols, DType::Float32, 4, 999, 1001);
    const LayerNormRun got = run_on_emu(p), ref = run_layer_norm(p.x, p.w, p.b, p.dy, 1e-5);
    check_close(got.rstd, ref.rstd, 1e-5, 1e-4, "rstd");
    check_close(got.y, ref.y, 1e-3, 1e-4, "y");  // x - mean itself carries float32 rounding of x ~ 1000
  }
}

// A row of 2^20 elements goes to one 256-thread block: 4096 elements per thread. Each thread's
// first element is 2^12, the rest 2^-12, exactly half an ulp of a running sum of 2^12, so a plain
// float sum rounds every one of them away (the mean comes out 1 instead of 1.000244) and the
// squared deviations lose the same way; the compensated sums (kernels/cuda/float_sum.cuh) keep them.
TEST_CASE("cuda layer_norm: a long row of mixed magnitudes keeps its statistics",
          "[cuda][layer_norm][family:layer_norm]") {
  REQUIRE(kernels::register_devices().emu);
  const std::int64_t n = 1 << 20;
  std::vector<float> v(static_cast<std::size_t>(n), 1.0f / 4096);
  for (std::size_t j = 0; j < 256; ++j) v[j] = 4096.0f;
  const Tensor x = from_vector<float>(v, {1, n});
  const kernels::LayerNormOutputs got = kernels::layer_norm(on_emu(x), Tensor(), Tensor(), 1e-5);
  kernels::CpuBackendGuard ref(kernels::Backend::Ref);
  const kernels::LayerNormOutputs want = kernels::layer_norm(kernels::cast(x, DType::Float64), Tensor(), Tensor(), 1e-5);
  auto rel_err = [](const Tensor& a, const Tensor& b) {
    const double g = values(a)[0], r = values(b)[0];
    return std::abs(g - r) / std::abs(r);
  };
  CHECK(rel_err(got.mean, want.mean) < 1e-6);
  CHECK(rel_err(got.rstd, want.rstd) < 1e-6);
}

TEST_CASE("cuda layer_norm: results are bit-identical under every thread schedule",
          "[cuda][layer_norm][family:layer_norm]") {
  REQUIRE(kernels::register_devices().emu);
  // Block per row (1031 cols) and warp per row (33 cols, 4 rows per block with the last block
  // partly empty) forward; the one-pass backward (up to 2,048 cols) and, for 3000 cols, the
  // separate dx and parameter-partial kernels; dweight/dbias come from per-chunk partials summed
  // in chunk order.
  for (std::int64_t cols : {1031, 33, 3000}) {
    INFO("cols " << cols);
    const Problem p = make_problem(257, cols, DType::Float32, 5);
    LayerNormRun forward;
    {
      kernels::EmuScheduleGuard schedule("forward");
      forward = run_on_emu(p);
    }
    for (const std::string s : {"reverse", "random:1", "race:12345"}) {
      INFO("schedule " << s);
      kernels::EmuScheduleGuard schedule(s);
      check_identical(run_on_emu(p), forward);
    }
  }
}

TEST_CASE("cuda layer_norm: parameter gradients do not depend on which gradients are requested",
          "[cuda][layer_norm][family:layer_norm]") {
  REQUIRE(kernels::register_devices().emu);
  // 70 cols: the one-pass kernel; 2500: dx and the parameter partials in kernels of their own.
  const std::int64_t cols = GENERATE(70, 2500);
  INFO("cols " << cols);
  const Problem p = make_problem(100, cols, DType::Float32, 6);
  const Tensor x = on_emu(p.x), w = on_emu(p.w), dy = on_emu(p.dy);
  const kernels::LayerNormOutputs f = kernels::layer_norm(x, w, Tensor(), 1e-5);
  const kernels::LayerNormGrads all = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
  const kernels::LayerNormGrads only_w = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, false, true, false);
  const kernels::LayerNormGrads only_b = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, false, false, true);
  const kernels::LayerNormGrads only_dx = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, false, false);
  CHECK_FALSE(only_w.dx.defined());
  CHECK_FALSE(only_w.dbias.defined());
  CHECK(values(only_w.dweight) == values(all.dweight));
  CHECK(values(only_b.dbias) == values(all.dbias));
  CHECK_FALSE(only_dx.dweight.defined());
  CHECK(values(only_dx.dx) == values(all.dx));
  // And they are the reference's up to rounding.
  const LayerNormRun ref = run_layer_norm(p.x, p.w, Tensor(), p.dy, 1e-5);
  check_close(values(all.dweight), ref.dweight, 1e-5, 1e-5, "dweight");
  check_close(values(all.dbias), ref.dbias, 1e-5, 1e-5, "dbias");
  check_close(values(all.dx), ref.dx, 1e-5, 1e-5, "dx");
}

// Mixed precision's layer norm: 16-bit x and dy, parameters in x's dtype or float32 (the master
// weights), statistics in float32. The kernels read and write the 16-bit tensors themselves, so an
// op takes as many launches as in float32 (widening would add a cast per tensor on each side), and
// the results are the reference's (exact upcast, float64 compute, one rounding) to within the
// format's rounding.
TEST_CASE("cuda layer_norm: 16-bit activations run natively with 16-bit or float32 parameters",
          "[cuda][layer_norm][family:layer_norm][float16]") {
  REQUIRE(kernels::register_devices().emu);
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    for (const DType param : {dt, DType::Float32}) {
      for (const std::int64_t cols : {96, 1500}) {  // one warp per row, one block per row
        INFO(dtype_name(dt) << " activations, " << dtype_name(param) << " parameters, cols " << cols);
        const Problem p32 = make_problem(cols == 96 ? 300 : 20, cols, DType::Float32, 7);
        const Problem p{kernels::cast(p32.x, dt), kernels::cast(p32.w, param), kernels::cast(p32.b, param),
                        kernels::cast(p32.dy, dt)};
        auto launches = [](const Problem& q) {
          const Tensor x = on_emu(q.x), w = on_emu(q.w), b = on_emu(q.b), dy = on_emu(q.dy);
          const std::uint64_t before = kernels::emu_kernel_launches();
          const kernels::LayerNormOutputs f = kernels::layer_norm(x, w, b, 1e-5);
          const std::uint64_t forward = kernels::emu_kernel_launches() - before;
          (void)kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
          return std::pair{forward, kernels::emu_kernel_launches() - before - forward};
        };
        CHECK(launches(p) == launches(p32));

        const Tensor x = on_emu(p.x), w = on_emu(p.w), b = on_emu(p.b), dy = on_emu(p.dy);
        const kernels::LayerNormOutputs f = kernels::layer_norm(x, w, b, 1e-5);
        const kernels::LayerNormGrads g = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
        CHECK(f.y.dtype() == dt);
        CHECK(f.mean.dtype() == DType::Float32);
        CHECK(f.rstd.dtype() == DType::Float32);
        CHECK(g.dx.dtype() == dt);
        CHECK(g.dweight.dtype() == param);
        CHECK(g.dbias.dtype() == param);
        const LayerNormRun got{values(f.y),  values(f.mean),    values(f.rstd),
                               values(g.dx), values(g.dweight), values(g.dbias)};
        const LayerNormRun ref = run_layer_norm(p.x, p.w, p.b, p.dy, 1e-5);
        const double eps = dt == DType::Float16 ? Half::epsilon : BFloat16::epsilon;
        check_close(got.y, ref.y, eps, 2 * eps, "y");
        check_close(got.mean, ref.mean, 1e-6, 1e-5, "mean");
        check_close(got.rstd, ref.rstd, 1e-6, 1e-5, "rstd");
        check_close(got.dx, ref.dx, eps, 2 * eps, "dx");
        // Sums over the rows in float: float32 parameters keep float32's accuracy.
        const double sum_tol = param == DType::Float32 ? 1e-4 : 2 * eps;
        check_close(got.dweight, ref.dweight, sum_tol, sum_tol, "dweight");
        check_close(got.dbias, ref.dbias, sum_tol, sum_tol, "dbias");
      }
    }
  }
}
