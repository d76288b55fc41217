// Layer norm: harness cases (fast path vs reference, float64 gradcheck for x, weight and bias),
// exact statistics, deterministic parameter gradients, and the named errors for bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <omp.h>

#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/layer_norm.h"

using namespace define;
using define::test::InputSpec;
using V = const std::vector<Tensor>&;

namespace {
// Shorthand builders for the InputSpecs these cases use.
InputSpec spec(Shape shape, double lo = -1.0, double hi = 1.0, bool non_contiguous = false) {
  InputSpec s;
  s.shape = std::move(shape);
  s.lo = lo;
  s.hi = hi;
  s.non_contiguous = non_contiguous;
  return s;
}
using define::test::values;
}  // namespace

TEST_CASE("ops: layer_norm", "[ops][harness][layer_norm][family:layer_norm]") {
  const InputSpec x35 = spec({3, 5}), w5 = spec({5}, 0.5, 1.5), b5 = spec({5});
  define::test::run_op_cases({
      {.name = "layer_norm/weight_and_bias", .inputs = {x35, w5, b5},
       .forward = [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {.name = "layer_norm/no_affine", .inputs = {x35}, .forward = [](V x) { return layer_norm(x[0], Tensor(), Tensor()); }},
      {.name = "layer_norm/weight_only", .inputs = {x35, w5},
       .forward = [](V x) { return layer_norm(x[0], x[1], Tensor()); }},
      {.name = "layer_norm/bias_only", .inputs = {x35, b5},
       .forward = [](V x) { return layer_norm(x[0], Tensor(), x[1]); }},
      {.name = "layer_norm/3d_non_contiguous", .inputs = {spec({2, 3, 4}, -1, 1, true),
                                                         spec({4}), spec({4})},
       .forward = [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {.name = "layer_norm/non_contiguous_weight",
       .inputs = {spec({4, 6}), spec({6}, -1, 1, true), spec({6})},
       .forward = [](V x) { return layer_norm(x[0], x[1], x[2], 1e-3); }},
      {.name = "layer_norm/33_features", .inputs = {spec({3, 33}), spec({33}),
                                                   spec({33})},
       .forward = [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      // One feature: xhat is 0, so the output is the bias and dx is 0.
      {.name = "layer_norm/one_feature", .inputs = {spec({4, 1}), spec({1}),
                                                   spec({1})},
       .forward = [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {.name = "layer_norm/1d_input", .inputs = {spec({7})}, .forward = [](V x) {
         return layer_norm(x[0], Tensor(), Tensor());
       }},
      // A large mean relative to the spread: statistics must be computed stably (two-pass).
      {.name = "layer_norm/offset_mean", .inputs = {spec({3, 8}, 100, 101), spec({8}, 0.5, 1.5)},
       .forward = [](V x) { return layer_norm(x[0], x[1], Tensor()); }, .atol = 2e-4, .rtol = 1e-4},
  });
}

// Odd shapes for the CUDA kernels (mode emu): row lengths 1, 31, 33, 257 (one warp per row, with
// partial warps and four-row blocks left partly empty) and 1031, 5000, 9000 (one block per row;
// 5000 and 9000 float32 elements are too long for the shared-memory row cache in the backward
// pass, 9000 also in the forward pass), 1 or 257 rows, with and without weight/bias. The full
// Jacobian check (mode grad) only runs where it stays small.
TEST_CASE("ops: layer_norm odd shapes", "[ops][harness][layer_norm][family:layer_norm]") {
  const auto affine = [](V x) { return layer_norm(x[0], x[1], x[2]); };
  const auto plain = [](V x) { return layer_norm(x[0], Tensor(), Tensor()); };
  const auto weight_only = [](V x) { return layer_norm(x[0], x[1], Tensor()); };
  const auto bias_only = [](V x) { return layer_norm(x[0], Tensor(), x[1]); };
  const auto with_params = [](std::int64_t rows, std::int64_t cols) {
    return std::vector<InputSpec>{spec({rows, cols}), spec({cols}, 0.5, 1.5), spec({cols})};
  };
  define::test::run_op_cases({
      {.name = "layer_norm/1x1", .inputs = with_params(1, 1), .forward = affine},
      {.name = "layer_norm/1x31_no_affine", .inputs = {spec({1, 31})}, .forward = plain},
      {.name = "layer_norm/5x33", .inputs = with_params(5, 33), .forward = affine},
      {.name = "layer_norm/1x257", .inputs = with_params(1, 257), .forward = affine},
      {.name = "layer_norm/257x1", .inputs = with_params(257, 1), .forward = affine},
      {.name = "layer_norm/257x1_no_affine", .inputs = {spec({257, 1})}, .forward = plain},
      {.name = "layer_norm/257x31_weight_only", .inputs = {spec({257, 31}), spec({31}, 0.5, 1.5)},
       .forward = weight_only, .gradcheck = false},
      {.name = "layer_norm/257x33_bias_only", .inputs = {spec({257, 33}), spec({33})}, .forward = bias_only,
       .gradcheck = false},
      {.name = "layer_norm/257x257", .inputs = with_params(257, 257), .forward = affine, .gradcheck = false},
      {.name = "layer_norm/257x257_no_affine", .inputs = {spec({257, 257})}, .forward = plain, .gradcheck = false},
      {.name = "layer_norm/1x1031", .inputs = with_params(1, 1031), .forward = affine, .gradcheck = false},
      {.name = "layer_norm/3x1031_no_affine", .inputs = {spec({3, 1031})}, .forward = plain, .gradcheck = false},
      {.name = "layer_norm/2x5000", .inputs = with_params(2, 5000), .forward = affine, .gradcheck = false},
      {.name = "layer_norm/2x9000_weight_only", .inputs = {spec({2, 9000}), spec({9000}, 0.5, 1.5)},
       .forward = weight_only, .gradcheck = false},
  });
}

TEST_CASE("layer_norm: rows are normalised to mean 0, variance 1", "[layer_norm][family:layer_norm]") {
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Tensor x = from_vector<double>({1, 2, 3, 4, -2, 0, 2, 4}, {2, 4});
    const auto y = values(layer_norm(x, Tensor(), Tensor(), 0.0));
    // Row 1: mean 2.5, biased variance 1.25.
    CHECK(y[0] == Approx(-1.5 / std::sqrt(1.25)).epsilon(1e-12));
    CHECK(y[3] == Approx(1.5 / std::sqrt(1.25)).epsilon(1e-12));
    // Row 2: mean 1, variance 5.
    CHECK(y[4] == Approx(-3.0 / std::sqrt(5.0)).epsilon(1e-12));
    // Affine part: y * w + b.
    Tensor w = from_vector<double>({1, 2, 3, 4}), b = from_vector<double>({0, 0, 0, 10});
    const auto ya = values(layer_norm(x, w, b, 0.0));
    CHECK(ya[3] == Approx(4 * 1.5 / std::sqrt(1.25) + 10).epsilon(1e-12));
    // Constant rows: variance 0, output is the bias (eps keeps it finite).
    const auto c = values(layer_norm(full({2, 3}, 7.0), Tensor(), from_vector<float>({1, 2, 3})));
    CHECK(c == std::vector<double>{1, 2, 3, 1, 2, 3});
    CHECK(layer_norm(zeros({0, 4}), Tensor(), Tensor()).shape() == Shape{0, 4});
  }
}

TEST_CASE("layer_norm: parameter gradients are identical for any thread count", "[layer_norm][family:layer_norm]") {
  Generator gen(11);
  Tensor x = rand_uniform({515, 256}, -2, 2, {}, gen);
  Tensor dy = rand_uniform({515, 256}, -1, 1, {}, gen);
  Tensor w = rand_uniform({256}, 0.5, 1.5, {}, gen);
  kernels::LayerNormOutputs f = kernels::layer_norm(x, w, Tensor(), 1e-5);
  std::vector<double> ref_w, ref_b, ref_x;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    kernels::LayerNormGrads g = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
    if (ref_w.empty()) {
      ref_w = values(g.dweight);
      ref_b = values(g.dbias);
      ref_x = values(g.dx);
    } else {
      CHECK(values(g.dweight) == ref_w);
      CHECK(values(g.dbias) == ref_b);
      CHECK(values(g.dx) == ref_x);
    }
  }
  omp_set_num_threads(saved);
  // And they agree with the reference.
  kernels::CpuBackendGuard guard(kernels::Backend::Ref);
  kernels::LayerNormGrads r = kernels::layer_norm_backward(dy, x, w, f.mean, f.rstd, true, true, true);
  CHECK(define::test::compare(ref_w, values(r.dweight), 1e-4, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(ref_b, values(r.dbias), 1e-4, 1e-5).max_share <= 1.0);
  CHECK(define::test::compare(ref_x, values(r.dx), 1e-5, 1e-5).max_share <= 1.0);
}

TEST_CASE("layer_norm: bad input raises named errors", "[layer_norm][family:layer_norm]") {
  using Catch::Contains;
  Tensor x = zeros({3, 5});
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({4}), Tensor()),
                      Contains("layer_norm: weight of shape [4] does not match the normalized size 5"));
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), zeros({5, 1})),
                      Contains("layer_norm: bias of shape [5,1] does not match the normalized size 5"));
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({5}, {.dtype = DType::Float64}), Tensor()),
                      Contains("layer_norm: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(layer_norm(zeros({3, 5}, {.dtype = DType::Int32}), Tensor(), Tensor()),
                      Contains("layer_norm: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(layer_norm(scalar_tensor(1.0), Tensor(), Tensor()),
                      Contains("layer_norm: expected a tensor with at least 1 dim"));
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), Tensor(), -1.0), Contains("layer_norm: eps must be finite and >= 0"));
  REQUIRE_THROWS_WITH(kernels::layer_norm_backward(zeros({3, 4}), x, Tensor(), zeros({3}), zeros({3}), true, false, false),
                      Contains("layer_norm_backward: gradient of shape [3,4] does not match input of shape [3,5]"));
  if (has_device(DeviceType::CUDA))
    REQUIRE_THROWS_WITH(layer_norm(x, zeros({5}, {.device = Device::cuda()}), Tensor()),
                        Contains("layer_norm: tensors on cpu and cuda:0"));
}
