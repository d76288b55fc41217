// The optim family (kernels/optim.h): the fused Adam update in the op harness (fast CPU path and
// the emulated CUDA kernel against the double reference), against the formula evaluated in
// float64 here, and its named errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/optim.h"

using namespace define;
using define::test::InputSpec;
using V = const std::vector<Tensor>&;

namespace {

InputSpec value(Shape shape, double lo, double hi, bool non_contiguous = false) {
  InputSpec s;
  s.shape = std::move(shape);
  s.lo = lo;
  s.hi = hi;
  s.grad = false;  // an optimizer step is not differentiated
  s.non_contiguous = non_contiguous;
  return s;
}

// Inputs p, g, m, v (v >= 0, as a second moment is): the updated p, m and v, flattened and joined,
// computed on copies so the harness's inputs stay as drawn.
Tensor adam_outputs(V x, const kernels::AdamHyper& h) {
  const Tensor p = clone(x[0]), m = clone(x[2]), v = clone(x[3]);
  kernels::adam_update(p, x[1], m, v, h);
  return concat({flatten(p), flatten(m), flatten(v)}, 0);
}

// Step 3 of Adam (0.9, 0.999) at lr 1e-3: the bias corrections are far from 1.
kernels::AdamHyper step3(double l2 = 0, double decay = 1) {
  const double b1 = 0.9, b2 = 0.999, lr = 1e-3, t = 3;
  return {.beta1 = b1,
          .beta2 = b2,
          .eps = 1e-8,
          .step_size = lr / (1 - std::pow(b1, t)),
          .inv_bias_sqrt = 1 / std::sqrt(1 - std::pow(b2, t)),
          .l2 = l2,
          .decay = decay};
}

std::vector<InputSpec> adam_inputs(const Shape& shape, bool non_contiguous_g = false) {
  return {value(shape, -1, 1), value(shape, -0.5, 0.5, non_contiguous_g), value(shape, -0.1, 0.1),
          value(shape, 0, 0.01)};
}

}  // namespace

TEST_CASE("ops: adam_update", "[ops][harness][optim][family:optim]") {
  // The update is about step_size = 3.7e-3 in size on p of order 1: tolerances well below it.
  const double atol = 1e-6, rtol = 1e-6;
  // Float32 / float64 only: mixed precision keeps float32 master weights, and 16-bit parameters are
  // refused (the argument-error test below checks it), so the 16-bit harness modes do not apply.
  define::test::run_op_cases({
      {.name = "adam/37", .inputs = adam_inputs({37}), .forward = [](V x) { return adam_outputs(x, step3()); },
       .atol = atol, .rtol = rtol, .gradcheck = false, .float16 = false},
      {.name = "adam/l2", .inputs = adam_inputs({4, 5}),
       .forward = [](V x) { return adam_outputs(x, step3(0.01)); }, .atol = atol, .rtol = rtol,
       .gradcheck = false, .float16 = false},
      {.name = "adam/decoupled_decay", .inputs = adam_inputs({4, 5}),
       .forward = [](V x) { return adam_outputs(x, step3(0, 1 - 1e-3 * 0.1)); }, .atol = atol, .rtol = rtol,
       .gradcheck = false, .float16 = false},
      {.name = "adam/both_terms", .inputs = adam_inputs({3, 7}),
       .forward = [](V x) { return adam_outputs(x, step3(0.01, 0.999)); }, .atol = atol, .rtol = rtol,
       .gradcheck = false, .float16 = false},
      {.name = "adam/non_contiguous_gradient", .inputs = adam_inputs({6, 5}, true),
       .forward = [](V x) { return adam_outputs(x, step3()); }, .atol = atol, .rtol = rtol,
       .gradcheck = false, .float16 = false},
      // Above the CPU path's parallel grain and several of the CUDA kernel's grid-stride rounds.
      {.name = "adam/threads", .inputs = adam_inputs({301, 131}),
       .forward = [](V x) { return adam_outputs(x, step3()); }, .atol = atol, .rtol = rtol,
       .gradcheck = false, .float16 = false},
  });
}

TEST_CASE("optim kernels: adam_update follows the formula in float64, every backend", "[optim]") {
  Generator gen(5);
  const std::int64_t n = 1000;
  const Tensor p0 = rand_uniform({n}, -1, 1, {DType::Float64}, gen), g = rand_uniform({n}, -1, 1, {DType::Float64}, gen),
               m0 = rand_uniform({n}, -0.1, 0.1, {DType::Float64}, gen),
               v0 = rand_uniform({n}, 0, 0.01, {DType::Float64}, gen);
  const kernels::AdamHyper h = step3(0.02, 0.99);
  const std::vector<double> P = p0.to_vector<double>(), G = g.to_vector<double>(), M = m0.to_vector<double>(),
                            Vv = v0.to_vector<double>();
  for (const kernels::Backend b : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(b);
    const Tensor p = clone(p0), m = clone(m0), v = clone(v0);
    kernels::adam_update(p, g, m, v, h);
    const std::vector<double> pp = p.to_vector<double>(), mm = m.to_vector<double>(), vv = v.to_vector<double>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double gi = G[i] + h.l2 * P[i];
      const double mi = h.beta1 * M[i] + (1 - h.beta1) * gi, vi = h.beta2 * Vv[i] + (1 - h.beta2) * gi * gi;
      const double pi = P[i] * h.decay - h.step_size * mi / (std::sqrt(vi) * h.inv_bias_sqrt + h.eps);
      INFO("element " << i << (b == kernels::Backend::Ref ? " (ref)" : " (cpu)"));
      REQUIRE(mm[i] == Approx(mi).epsilon(1e-14).margin(1e-16));
      REQUIRE(vv[i] == Approx(vi).epsilon(1e-14).margin(1e-18));
      REQUIRE(pp[i] == Approx(pi).epsilon(1e-14).margin(1e-16));
    }
  }
}

TEST_CASE("optim kernels: adam_update refuses mismatched or non-contiguous state with a named error", "[optim]") {
  const Tensor p = zeros({4, 3}), g = zeros({4, 3}), m = zeros({4, 3}), v = zeros({4, 3});
  const kernels::AdamHyper h = step3();
  CHECK_THROWS_WITH(kernels::adam_update(p, zeros({3, 4}), m, v, h), Catch::Contains("adam_update: shapes differ"));
  CHECK_THROWS_WITH(kernels::adam_update(p, g, zeros({12}), v, h), Catch::Contains("shapes differ"));
  CHECK_THROWS_WITH(kernels::adam_update(p, g, m, zeros({4, 3}, {DType::Float64}), h),
                    Catch::Contains("dtypes float32 and float64 do not match"));
  const Tensor mt = zeros({3, 4}).as_strided({4, 3}, {1, 4}, 0);
  CHECK_THROWS_WITH(kernels::adam_update(p, g, mt, v, h), Catch::Contains("must be contiguous"));
  CHECK_THROWS_WITH(kernels::adam_update(zeros({2}, {DType::Int64}), zeros({2}, {DType::Int64}),
                                         zeros({2}, {DType::Int64}), zeros({2}, {DType::Int64}), h),
                    Catch::Contains("expected a floating-point tensor"));
  // Mixed precision keeps float32 master weights: 16-bit parameters are refused by name.
  CHECK_THROWS_WITH(kernels::adam_update(zeros({2}, {DType::Float16}), zeros({2}, {DType::Float16}),
                                         zeros({2}, {DType::Float16}), zeros({2}, {DType::Float16}), h),
                    Catch::Contains("mixed precision keeps float32 master weights"));
  CHECK_THROWS_WITH(kernels::adam_update(Tensor(), g, m, v, h), Catch::Contains("must all be defined"));
  // An empty parameter is a no-op, not an error.
  CHECK_NOTHROW(kernels::adam_update(zeros({0}), zeros({0}), zeros({0}), zeros({0}), h));
}
