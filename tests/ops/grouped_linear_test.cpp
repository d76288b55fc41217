// Grouped linear (the GLT of DeFINE/DExTra): harness cases (fast path and CUDA kernels on the
// emulated device against the reference, float64 gradcheck of x, weight and bias), agreement
// with g separate linear() calls, empty sizes, thread-count independence of the CPU path, and
// the named errors for bad input.
#include <catch2/catch.hpp>

#include <omp.h>

#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "kernels/grouped_linear.h"

using namespace define;
using define::test::InputSpec;
using V = const std::vector<Tensor>&;

namespace {

InputSpec spec(Shape shape, bool non_contiguous = false) {
  InputSpec s;
  s.shape = std::move(shape);
  s.non_contiguous = non_contiguous;
  return s;
}

using define::test::values;

const auto with_bias = [](V x) { return grouped_linear(x[0], x[1], x[2]); };
const auto without_bias = [](V x) { return grouped_linear(x[0], x[1]); };

// An OpCase for x [rows, g*k_in] -> [rows, g*k_out], with bias [g, k_out] unless !bias.
define::test::OpCase glt_case(std::int64_t g, std::int64_t k_in, std::int64_t k_out, std::int64_t rows, bool bias,
                              bool gradcheck) {
  define::test::OpCase c;
  c.name = "grouped_linear/g" + std::to_string(g) + "_" + std::to_string(k_in) + "to" + std::to_string(k_out) + "_T" +
           std::to_string(rows) + (bias ? "" : "_no_bias");
  c.inputs = {spec({rows, g * k_in}), spec({g, k_in, k_out})};
  if (bias) c.inputs.push_back(spec({g, k_out}));
  c.forward = bias ? std::function<Tensor(V)>(with_bias) : std::function<Tensor(V)>(without_bias);
  c.gradcheck = gradcheck;
  return c;
}

}  // namespace

// Group counts 1, 2, 4, 8 with odd per-group widths (3, 5, 33) and 1, 31 or 257 rows. The full
// Jacobian check (mode grad) runs on the small ones.
TEST_CASE("ops: grouped_linear", "[ops][harness][grouped_linear][family:grouped_linear]") {
  define::test::run_op_cases({
      glt_case(1, 3, 5, 1, true, true),
      glt_case(1, 5, 3, 31, false, true),
      glt_case(2, 3, 5, 31, true, true),
      glt_case(2, 5, 3, 1, false, true),
      glt_case(4, 5, 3, 31, true, true),
      glt_case(4, 3, 5, 1, false, true),
      glt_case(8, 3, 3, 1, true, true),
      glt_case(8, 3, 5, 31, false, true),
      glt_case(1, 33, 33, 257, true, false),
      glt_case(2, 33, 5, 257, true, false),
      glt_case(4, 33, 33, 257, false, false),
      glt_case(8, 5, 33, 31, true, false),
      glt_case(8, 33, 3, 257, true, false),
  });
}

// Leading dims, non-contiguous operands, width-1 groups, and sizes that leave partial 64x64
// tiles and 16-deep slices in the CUDA kernel (65 rows / columns, depths 17 and 65).
TEST_CASE("ops: grouped_linear shapes and layouts", "[ops][harness][grouped_linear][family:grouped_linear]") {
  define::test::run_op_cases({
      {.name = "grouped_linear/3d_input", .inputs = {spec({2, 5, 4 * 3}), spec({4, 3, 5}), spec({4, 5})},
       .forward = with_bias},
      {.name = "grouped_linear/3d_input_no_bias", .inputs = {spec({2, 5, 2 * 5}), spec({2, 5, 3})},
       .forward = without_bias},
      {.name = "grouped_linear/1d_input", .inputs = {spec({4 * 3}), spec({4, 3, 5}), spec({4, 5})},
       .forward = with_bias},
      {.name = "grouped_linear/non_contiguous_input", .inputs = {spec({7, 4 * 5}, true), spec({4, 5, 3}), spec({4, 3})},
       .forward = with_bias},
      {.name = "grouped_linear/3d_non_contiguous_input",
       .inputs = {spec({2, 5, 8 * 3}, true), spec({8, 3, 5}), spec({8, 5})}, .forward = with_bias},
      {.name = "grouped_linear/non_contiguous_weight_and_bias",
       .inputs = {spec({6, 2 * 3}), spec({2, 3, 5}, true), spec({2, 5}, true)}, .forward = with_bias},
      {.name = "grouped_linear/width_1_groups", .inputs = {spec({5, 4}), spec({4, 1, 1}), spec({4, 1})},
       .forward = with_bias},
      {.name = "grouped_linear/g2_17to65_T130", .inputs = {spec({130, 2 * 17}), spec({2, 17, 65}), spec({2, 65})},
       .forward = with_bias, .gradcheck = false},
      {.name = "grouped_linear/g3_65to17_T65", .inputs = {spec({65, 3 * 65}, true), spec({3, 65, 17}), spec({3, 17})},
       .forward = with_bias, .gradcheck = false},
  });
}

TEST_CASE("grouped_linear: the defining sum, by hand", "[grouped_linear][family:grouped_linear]") {
  // x = [1 2 | 3 4], g = 2, k_in = 2, k_out = 1: y = [1*w00 + 2*w01 + b0, 3*w10 + 4*w11 + b1].
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {1, 4});
  const Tensor w = from_vector<double>({10, 20, 30, 40}, {2, 2, 1});
  const Tensor b = from_vector<double>({0.5, -0.5}, {2, 1});
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    CHECK(values(grouped_linear(x, w, b)) == std::vector<double>{50.5, 249.5});
    CHECK(values(grouped_linear(x, w)) == std::vector<double>{50, 250});
  }
}

// The op is g independent linear layers on contiguous chunks of the features, concatenated
// group-major: forward values and all three gradients agree with that composition (up to
// summation order), on the CPU fast path and on the emulated CUDA device.
TEST_CASE("grouped_linear: equals g separate linear() calls on the chunks, concatenated",
          "[grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  const std::int64_t g = 4, k_in = 6, k_out = 5;
  Generator gen(21);
  const Tensor x0 = rand_uniform({3, 7, g * k_in}, -1, 1, {}, gen);
  const Tensor w0 = rand_uniform({g, k_in, k_out}, -1, 1, {}, gen);
  const Tensor b0 = rand_uniform({g, k_out}, -1, 1, {}, gen);
  const Tensor up0 = rand_uniform({3, 7, g * k_out}, -1, 1, {}, gen);
  for (const Device device : {Device::cpu(), Device::emu()}) {
    INFO("device " << device.str());
    struct Run {
      std::vector<double> y, dx, dw, db;
    };
    const auto run = [&](bool grouped) {
      Tensor x = copy_to_device(x0, device), w = copy_to_device(w0, device), b = copy_to_device(b0, device);
      for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
      Tensor y;
      if (grouped) {
        y = grouped_linear(x, w, b);
      } else {
        std::vector<Tensor> parts;
        const std::vector<Tensor> chunks = chunk(x, g, -1);
        for (std::int64_t i = 0; i < g; ++i)
          parts.push_back(linear(chunks[i], transpose(select(w, 0, i), 0, 1), select(b, 0, i)));
        y = concat(parts, -1);
      }
      backward(y, copy_to_device(up0, device));
      return Run{values(y), values(x.grad()), values(w.grad()), values(b.grad())};
    };
    const Run grouped = run(true), separate = run(false);
    const auto close = [](const std::vector<double>& a, const std::vector<double>& b) {
      REQUIRE(a.size() == b.size());
      return define::test::compare(a, b, 1e-5, 1e-5).max_share <= 1.0;
    };
    CHECK(close(grouped.y, separate.y));
    CHECK(close(grouped.dx, separate.dx));
    CHECK(close(grouped.dw, separate.dw));
    CHECK(close(grouped.db, separate.db));
  }
}

TEST_CASE("grouped_linear: empty sizes", "[grouped_linear][family:grouped_linear]") {
  REQUIRE(kernels::register_devices().emu);
  for (const Device device : {Device::cpu(), Device::emu()}) {
    for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
      INFO("device " << device.str() << ", backend " << static_cast<int>(backend));
      kernels::CpuBackendGuard guard(backend);
      const TensorOptions opt{DType::Float32, device};
      // No rows: empty output, zero parameter gradients.
      const Tensor x0 = zeros({0, 6}, opt), w = ones({2, 3, 4}, opt), b = ones({2, 4}, opt);
      CHECK(kernels::grouped_linear(x0, w, b).shape() == Shape{0, 8});
      const kernels::GroupedLinearGrads g0 =
          kernels::grouped_linear_backward(zeros({0, 8}, opt), x0, w, true, true, true);
      CHECK(g0.dx.shape() == Shape{0, 6});
      CHECK(values(g0.dweight) == std::vector<double>(24, 0.0));
      CHECK(values(g0.dbias) == std::vector<double>(8, 0.0));
      // No input features: the output is the bias; dx is empty, dweight has no elements.
      const Tensor xe = zeros({3, 0}, opt), we = ones({2, 0, 2}, opt), be = from_vector<float>({1, 2, 3, 4}, {2, 2});
      CHECK(values(kernels::grouped_linear(xe, we, copy_to_device(be, device))) ==
            std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
      CHECK(values(kernels::grouped_linear(xe, we, Tensor())) == std::vector<double>(12, 0.0));
      const kernels::GroupedLinearGrads ge =
          kernels::grouped_linear_backward(ones({3, 4}, opt), xe, we, true, true, true);
      CHECK(ge.dx.shape() == Shape{3, 0});
      CHECK(ge.dweight.shape() == Shape{2, 0, 2});
      CHECK(values(ge.dbias) == std::vector<double>{3, 3, 3, 3});
      // No output features: empty output, dx is zero.
      const Tensor xo = ones({3, 4}, opt), wo = ones({2, 2, 0}, opt);
      CHECK(kernels::grouped_linear(xo, wo, Tensor()).shape() == Shape{3, 0});
      const kernels::GroupedLinearGrads go =
          kernels::grouped_linear_backward(zeros({3, 0}, opt), xo, wo, true, true, true);
      CHECK(values(go.dx) == std::vector<double>(12, 0.0));
      CHECK(go.dbias.shape() == Shape{2, 0});
    }
  }
}

TEST_CASE("grouped_linear: CPU results are identical for any thread count", "[grouped_linear][family:grouped_linear]") {
  // 1000 rows: dweight sums 3 row chunks (in chunk order), y and dx run 4 row blocks per group.
  Generator gen(12);
  const std::int64_t g = 4, k_in = 64, k_out = 48, rows = 1000;
  const Tensor x = rand_uniform({rows, g * k_in}, -1, 1, {}, gen);
  const Tensor w = rand_uniform({g, k_in, k_out}, -1, 1, {}, gen);
  const Tensor b = rand_uniform({g, k_out}, -1, 1, {}, gen);
  const Tensor dy = rand_uniform({rows, g * k_out}, -1, 1, {}, gen);
  std::vector<double> ref_y, ref_dx, ref_dw, ref_db;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    omp_set_num_threads(threads);
    const Tensor y = kernels::grouped_linear(x, w, b);
    const kernels::GroupedLinearGrads gr = kernels::grouped_linear_backward(dy, x, w, true, true, true);
    if (ref_y.empty()) {
      ref_y = values(y);
      ref_dx = values(gr.dx);
      ref_dw = values(gr.dweight);
      ref_db = values(gr.dbias);
    } else {
      CHECK(values(y) == ref_y);
      CHECK(values(gr.dx) == ref_dx);
      CHECK(values(gr.dweight) == ref_dw);
      CHECK(values(gr.dbias) == ref_db);
    }
  }
  omp_set_num_threads(saved);
  // And they agree with the reference (dweight sums 1000 products per element).
  kernels::CpuBackendGuard guard(kernels::Backend::Ref);
  const kernels::GroupedLinearGrads r = kernels::grouped_linear_backward(dy, x, w, true, true, true);
  CHECK(define::test::compare(ref_y, values(kernels::grouped_linear(x, w, b)), 1e-5, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(ref_dx, values(r.dx), 1e-5, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(ref_dw, values(r.dweight), 1e-4, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(ref_db, values(r.dbias), 1e-4, 1e-5).max_share <= 1.0);
}

TEST_CASE("grouped_linear: bad input raises named errors", "[grouped_linear][family:grouped_linear]") {
  using Catch::Contains;
  REQUIRE(kernels::register_devices().emu);
  const Tensor w = zeros({4, 7, 5});
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 30}), w),
                      Contains("grouped_linear: input width 30 is not divisible by 4 groups"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 32}), w),
                      Contains("grouped_linear: input width 32 gives 8 features per group but weight [4,7,5] "
                               "expects 7"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 28}), zeros({28, 5})),
                      Contains("grouped_linear: weight must be 3-d [groups, in_per_group, out_per_group], got [28,5]"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 0}), zeros({0, 0, 5})),
                      Contains("grouped_linear: weight [0,0,5] has no groups"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 28}), w, zeros({20})),
                      Contains("grouped_linear: bias of shape [20] does not match [4,5] (weight [4,7,5])"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 28}), zeros({4, 7, 5}, {.dtype = DType::Float64})),
                      Contains("grouped_linear: dtypes float32 and float64 do not match"));
  const TensorOptions int32{.dtype = DType::Int32};
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 28}, int32), zeros({4, 7, 5}, int32)),
                      Contains("grouped_linear: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(grouped_linear(scalar_tensor(1.0), w),
                      Contains("grouped_linear: expected an input with at least 1 dim"));
  REQUIRE_THROWS_WITH(grouped_linear(zeros({2, 28}), zeros({4, 7, 5}, {.device = Device::emu()})),
                      Contains("grouped_linear: tensors on cpu and emu:0"));
  REQUIRE_THROWS_WITH(kernels::grouped_linear_backward(zeros({2, 21}), zeros({2, 28}), w, true, true, true),
                      Contains("grouped_linear_backward: gradient width 21 does not match 4 groups of 5 outputs"));
  REQUIRE_THROWS_WITH(kernels::grouped_linear_backward(zeros({3, 20}), zeros({2, 28}), w, true, true, true),
                      Contains("grouped_linear_backward: gradient of shape [3,20] does not match input of shape "
                               "[2,28]"));
  REQUIRE_THROWS_WITH(kernels::grouped_linear_backward(zeros({3, 20}), Tensor(), w, false, true, false),
                      Contains("grouped_linear_backward: the weight gradient needs the input"));
}
