// Softmax family: softmax, log_softmax, cross_entropy, nll_loss. Harness cases (fast path vs
// reference, float64 gradcheck), exact values, and the named errors for bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/softmax.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using V = const std::vector<Tensor>&;
using Fill = InputSpec::Fill;

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
InputSpec uniform(Shape s) { return spec(std::move(s)); }
InputSpec strided(Shape s) { return spec(std::move(s), -1.0, 1.0, true); }
InputSpec classes(std::int64_t n, std::int64_t c, DType dt = DType::Int64) {
  InputSpec s = spec({n});
  s.fill = Fill::Index;
  s.index_high = c;
  s.index_dtype = dt;
  s.grad = false;
  return s;
}
InputSpec fixed_targets(std::vector<double> v) {
  InputSpec s = spec({static_cast<std::int64_t>(v.size())});
  s.fill = Fill::Fixed;
  s.grad = false;
  s.values = std::move(v);
  return s;
}

InputSpec int32_targets(std::vector<double> v) {
  InputSpec s = fixed_targets(std::move(v));
  s.index_dtype = DType::Int32;
  return s;
}

using define::test::values;

}  // namespace

TEST_CASE("ops: softmax and log_softmax", "[ops][harness][softmax][family:softmax]") {
  define::test::run_op_cases({
      {.name = "softmax/dim1", .inputs = {uniform({3, 5})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/dim0", .inputs = {uniform({4, 3})}, .forward = [](V x) { return softmax(x[0], 0); }},
      {.name = "softmax/dim-1_3d", .inputs = {uniform({2, 3, 4})}, .forward = [](V x) { return softmax(x[0], -1); }},
      {.name = "softmax/middle_dim", .inputs = {uniform({2, 3, 4})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/non_contiguous", .inputs = {strided({3, 5})}, .forward = [](V x) { return softmax(x[0], -1); }},
      {.name = "softmax/non_contiguous_dim0", .inputs = {strided({4, 3})}, .forward = [](V x) { return softmax(x[0], 0); }},
      {.name = "softmax/row_length_1", .inputs = {uniform({4, 1})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/row_length_33", .inputs = {uniform({2, 33})}, .forward = [](V x) { return softmax(x[0], 1); }},
      // More than one 64-column block when the softmax dim is not the last.
      {.name = "softmax/dim0_70_columns", .inputs = {uniform({3, 70})}, .forward = [](V x) { return softmax(x[0], 0); }},
      // Logits this large overflow exp() unless the row maximum is subtracted first.
      {.name = "softmax/large_logits", .inputs = {spec({2, 7}, 80, 100)},
       .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/1d", .inputs = {uniform({6})}, .forward = [](V x) { return softmax(x[0], 0); }},
      {.name = "log_softmax/dim1", .inputs = {uniform({3, 5})}, .forward = [](V x) { return log_softmax(x[0], 1); }},
      {.name = "log_softmax/dim0", .inputs = {uniform({4, 3})}, .forward = [](V x) { return log_softmax(x[0], 0); }},
      {.name = "log_softmax/middle_dim", .inputs = {uniform({2, 3, 4})},
       .forward = [](V x) { return log_softmax(x[0], -2); }},
      {.name = "log_softmax/non_contiguous", .inputs = {strided({3, 5})},
       .forward = [](V x) { return log_softmax(x[0], -1); }},
      {.name = "log_softmax/row_length_1", .inputs = {uniform({4, 1})}, .forward = [](V x) { return log_softmax(x[0], 1); }},
      {.name = "log_softmax/row_length_33", .inputs = {uniform({2, 33})},
       .forward = [](V x) { return log_softmax(x[0], 1); }},
      {.name = "log_softmax/dim0_70_columns", .inputs = {uniform({3, 70})},
       .forward = [](V x) { return log_softmax(x[0], 0); }},
      {.name = "log_softmax/large_logits", .inputs = {spec({2, 7}, 80, 100)},
       .forward = [](V x) { return log_softmax(x[0], 1); }},
  });
}

// Sizes chosen around the CUDA kernels' geometry (kernels/cuda/softmax.cu): rows of up to 1024
// elements go one warp per row (31 and 33 leave a partial warp pass, 257 eight full passes and one
// lane), longer rows one 512-thread block per row (1025 and 1100 leave a partial block pass), and a
// softmax over a dim that is not the last goes to 32-column x 8-slice tiles (7 or 40 columns leave
// partial tiles; 33 rows are not a multiple of the 8 slices).
TEST_CASE("ops: softmax and log_softmax at odd sizes", "[ops][harness][softmax][family:softmax]") {
  define::test::run_op_cases({
      {.name = "softmax/one_row_1", .inputs = {uniform({1, 1})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/row_length_31", .inputs = {uniform({3, 31})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/one_row_257", .inputs = {uniform({1, 257})}, .forward = [](V x) { return softmax(x[0], -1); }},
      {.name = "softmax/9_rows_33", .inputs = {uniform({9, 33})}, .forward = [](V x) { return softmax(x[0], 1); }},
      {.name = "softmax/dim0_33x7", .inputs = {uniform({33, 7})}, .forward = [](V x) { return softmax(x[0], 0); }},
      {.name = "softmax/dim0_33x7_non_contiguous", .inputs = {strided({33, 7})},
       .forward = [](V x) { return softmax(x[0], 0); }},
      {.name = "softmax/middle_dim_40_columns", .inputs = {uniform({2, 5, 40})},
       .forward = [](V x) { return softmax(x[0], 1); }},
      // Full float64 Jacobians of these would take seconds; the smaller cases check the gradients.
      {.name = "softmax/block_row_1100", .inputs = {spec({2, 1100}, -4, 4)},
       .forward = [](V x) { return softmax(x[0], 1); }, .gradcheck = false},
      {.name = "log_softmax/row_length_31", .inputs = {uniform({4, 31})},
       .forward = [](V x) { return log_softmax(x[0], 1); }},
      {.name = "log_softmax/one_row_257", .inputs = {spec({1, 257}, -5, 5)},
       .forward = [](V x) { return log_softmax(x[0], 1); }},
      {.name = "log_softmax/dim0_33x7", .inputs = {uniform({33, 7})},
       .forward = [](V x) { return log_softmax(x[0], 0); }},
      {.name = "log_softmax/block_row_1025", .inputs = {spec({3, 1025}, -4, 4)},
       .forward = [](V x) { return log_softmax(x[0], -1); }, .gradcheck = false},
      {.name = "log_softmax/dim0_1_row", .inputs = {uniform({1, 31})},
       .forward = [](V x) { return log_softmax(x[0], 0); }},
  });
}

TEST_CASE("ops: cross_entropy and nll_loss", "[ops][harness][softmax][family:softmax]") {
  const InputSpec logits45 = uniform({4, 5});
  const InputSpec with_ignored = fixed_targets({1, -100, 3, -100});
  define::test::run_op_cases({
      {.name = "cross_entropy/mean", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "cross_entropy/sum", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::Sum); }},
      {.name = "cross_entropy/none", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::None); }},
      {.name = "cross_entropy/ignore_index_mean", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "cross_entropy/ignore_index_sum", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::Sum); }},
      {.name = "cross_entropy/ignore_index_none", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::None); }},
      {.name = "cross_entropy/custom_ignore_index", .inputs = {logits45, fixed_targets({2, 0, 2, 4})},
       .forward = [](V x) { return cross_entropy(x[0], x[1], 2); }},
      {.name = "cross_entropy/label_smoothing_mean", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.1); }},
      {.name = "cross_entropy/label_smoothing_sum", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.1, Reduction::Sum); }},
      {.name = "cross_entropy/label_smoothing_none", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.1, Reduction::None); }},
      {.name = "cross_entropy/all_ignored", .inputs = {uniform({3, 4}), fixed_targets({-100, -100, -100})},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "cross_entropy/int32_target", .inputs = {logits45, classes(4, 5, DType::Int32)},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "cross_entropy/non_contiguous_logits", .inputs = {strided({5, 4}), classes(5, 4)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.1); }},
      {.name = "cross_entropy/33_classes", .inputs = {uniform({3, 33}), classes(3, 33)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.2, Reduction::None); }},
      {.name = "cross_entropy/one_class", .inputs = {uniform({3, 1}), classes(3, 1)},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "nll_loss/mean", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return nll_loss(x[0], x[1]); }},
      {.name = "nll_loss/sum", .inputs = {logits45, classes(4, 5)},
       .forward = [](V x) { return nll_loss(x[0], x[1], -100, Reduction::Sum); }},
      {.name = "nll_loss/none_ignored", .inputs = {logits45, with_ignored},
       .forward = [](V x) { return nll_loss(x[0], x[1], -100, Reduction::None); }},
      {.name = "nll_loss/of_log_softmax_ignored", .inputs = {strided({4, 5}), with_ignored},
       .forward = [](V x) { return nll_loss(log_softmax(x[0], 1), x[1]); }},
  });
}

TEST_CASE("ops: cross_entropy and nll_loss at odd sizes", "[ops][harness][softmax][family:softmax]") {
  // Ignored targets (-100) among the rows, so the ignored-row paths of every kernel run.
  std::vector<double> targets31(31);
  for (int i = 0; i < 31; ++i) targets31[i] = i % 4 == 1 ? -100 : (i * 7) % 33;
  const InputSpec ignoring31 = fixed_targets(targets31);
  define::test::run_op_cases({
      {.name = "cross_entropy/31x33_ignored_mean", .inputs = {uniform({31, 33}), ignoring31},
       .forward = [](V x) { return cross_entropy(x[0], x[1]); }},
      {.name = "cross_entropy/31x33_ignored_smoothing_none", .inputs = {uniform({31, 33}), ignoring31},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.15, Reduction::None); }},
      {.name = "cross_entropy/one_row_257", .inputs = {spec({1, 257}, -3, 3), classes(1, 257)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.1); }},
      {.name = "cross_entropy/one_row_1_class", .inputs = {uniform({1, 1}), classes(1, 1, DType::Int32)},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::Sum); }},
      {.name = "cross_entropy/block_rows_1100_ignored",
       .inputs = {spec({3, 1100}, -4, 4), fixed_targets({1099, -100, 0})},
       .forward = [](V x) { return cross_entropy(x[0], x[1], -100, 0.05); }},
      {.name = "cross_entropy/int32_ignore_hits_sum", .inputs = {uniform({4, 31}), int32_targets({30, 5, 5, 0})},
       .forward = [](V x) { return cross_entropy(x[0], x[1], 5, 0.0, Reduction::Sum); }},
      {.name = "nll_loss/31x33_ignored_mean", .inputs = {uniform({31, 33}), ignoring31},
       .forward = [](V x) { return nll_loss(x[0], x[1]); }},
      {.name = "nll_loss/257_classes_none", .inputs = {uniform({3, 257}), fixed_targets({256, -100, 0})},
       .forward = [](V x) { return nll_loss(x[0], x[1], -100, Reduction::None); }},
      {.name = "nll_loss/of_log_softmax_1100", .inputs = {spec({2, 1100}, -4, 4), fixed_targets({-100, 1099})},
       .forward = [](V x) { return nll_loss(log_softmax(x[0], 1), x[1], -100, Reduction::Sum); }},
  });
}

TEST_CASE("softmax: exact values", "[softmax][family:softmax]") {
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Tensor x = from_vector<double>({1, 2, 3}, {1, 3});
    const auto y = values(softmax(x, 1));
    CHECK(y[0] == Approx(e1 / s).epsilon(1e-12));
    CHECK(y[2] == Approx(e3 / s).epsilon(1e-12));
    // Huge equal logits: stable evaluation gives log(1/2) exactly where a naive one overflows.
    const auto l = values(log_softmax(from_vector<float>({1000.f, 1000.f}, {2}), 0));
    CHECK(l[0] == Approx(-std::log(2.0)).epsilon(1e-6));
    CHECK(l[1] == Approx(-std::log(2.0)).epsilon(1e-6));
    // Masked (-inf) logits get exactly zero probability.
    const float inf = std::numeric_limits<float>::infinity();
    const auto m = values(softmax(from_vector<float>({0.f, -inf, 0.f, -inf}, {1, 4}), -1));
    CHECK(m == std::vector<double>{0.5, 0.0, 0.5, 0.0});
    // A 0-d tensor is a single row of one element.
    CHECK(softmax(scalar_tensor(3.0), 0).item_double() == 1.0);
    // Empty tensors pass through.
    CHECK(softmax(zeros({0, 5}), 1).shape() == Shape{0, 5});
  }
}

TEST_CASE("softmax: vocabulary-sized rows match the reference", "[softmax][family:softmax]") {
  Generator gen(3);
  for (std::int64_t n : {32, 1000, 50257}) {
    Tensor x = rand_uniform({3, n}, -8, 8, {}, gen);
    Tensor dy = rand_uniform({3, n}, -1, 1, {}, gen);
    std::vector<std::vector<double>> got[2];
    for (int b = 0; b < 2; ++b) {
      kernels::CpuBackendGuard guard(b == 0 ? kernels::Backend::Ref : kernels::Backend::Cpu);
      Tensor y = kernels::softmax(x, 1), ly = kernels::log_softmax(x, 1);
      got[b] = {values(y), values(ly), values(kernels::softmax_backward(y, dy, 1)),
                values(kernels::log_softmax_backward(ly, dy, 1))};
    }
    for (std::size_t k = 0; k < got[0].size(); ++k) {
      const auto cmp = define::test::compare(got[1][k], got[0][k], 1e-6, 1e-5);
      INFO("n = " << n << ", output " << k << ": max abs err " << cmp.max_abs_err);
      CHECK(cmp.max_share <= 1.0);
    }
  }
}

TEST_CASE("cross_entropy: exact values", "[softmax][family:softmax]") {
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Tensor logits = from_vector<double>({1, 2, 3, 0, 0, 0}, {2, 3});
    Tensor target = from_vector<std::int64_t>({2, 1});
    const auto rows = values(cross_entropy(logits, target, -100, 0.0, Reduction::None));
    CHECK(rows[0] == Approx(lse - 3.0).epsilon(1e-12));
    CHECK(rows[1] == Approx(std::log(3.0)).epsilon(1e-12));
    CHECK(cross_entropy(logits, target).item_double() == Approx((lse - 3.0 + std::log(3.0)) / 2).epsilon(1e-12));
    CHECK(cross_entropy(logits, target, -100, 0.0, Reduction::Sum).item_double() ==
          Approx(lse - 3.0 + std::log(3.0)).epsilon(1e-12));
    // Label smoothing: (1 - eps) * nll + eps * mean_c(-log p_c); uniform logits are unaffected.
    const auto smooth = values(cross_entropy(logits, target, -100, 0.1, Reduction::None));
    CHECK(smooth[0] == Approx(0.9 * (lse - 3.0) + 0.1 * (lse - 2.0)).epsilon(1e-12));
    CHECK(smooth[1] == Approx(std::log(3.0)).epsilon(1e-12));
    // The mean is over non-ignored rows only.
    Tensor one_ignored = from_vector<std::int64_t>({2, -100});
    CHECK(cross_entropy(logits, one_ignored).item_double() == Approx(lse - 3.0).epsilon(1e-12));
    CHECK(values(cross_entropy(logits, one_ignored, -100, 0.0, Reduction::None))[1] == 0.0);
    // No rows at all: an empty mean is 0, an empty per-row loss is empty.
    Tensor no_target = zeros({0}, {.dtype = DType::Int64});
    CHECK(cross_entropy(zeros({0, 3}), no_target).item_double() == 0.0);
    CHECK(cross_entropy(zeros({0, 3}), no_target, -100, 0.0, Reduction::None).shape() == Shape{0});
    // nll_loss of log_softmax is cross_entropy.
    CHECK(nll_loss(log_softmax(logits, 1), target).item_double() ==
          Approx(cross_entropy(logits, target).item_double()).epsilon(1e-12));
  }
}

TEST_CASE("cross_entropy: every target ignored gives 0 and zero gradients, no NaN", "[softmax][family:softmax]") {
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Tensor logits = rand_uniform({3, 4}, -1, 1);
    logits.set_requires_grad();
    Tensor target = from_vector<std::int64_t>({-100, -100, -100});
    Tensor loss = cross_entropy(logits, target, -100, 0.1);
    CHECK(loss.item_double() == 0.0);
    backward(loss);
    for (double g : values(logits.grad())) CHECK(g == 0.0);
    Tensor lp = rand_uniform({3, 4}, -1, 1);
    lp.set_requires_grad();
    Tensor nll = nll_loss(lp, target);
    CHECK(nll.item_double() == 0.0);
    backward(nll);
    for (double g : values(lp.grad())) CHECK(g == 0.0);
  }
}

TEST_CASE("cross_entropy: gradient rows sum to zero and ignored rows are zero", "[softmax][family:softmax]") {
  Tensor logits = rand_uniform({4, 6}, -2, 2);
  logits.set_requires_grad();
  Tensor target = from_vector<std::int64_t>({5, -100, 0, 3});
  backward(cross_entropy(logits, target, -100, 0.1));
  const auto g = values(logits.grad());
  for (int i = 0; i < 4; ++i) {
    double row = 0;
    for (int c = 0; c < 6; ++c) row += g[i * 6 + c];
    CHECK(std::abs(row) < 1e-6);
  }
  for (int c = 0; c < 6; ++c) CHECK(g[6 + c] == 0.0);
}

TEST_CASE("softmax family: bad input raises named errors", "[softmax][family:softmax]") {
  using Catch::Contains;
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(softmax(x, 3), Contains("softmax: dim 3 out of range"));
  REQUIRE_THROWS_WITH(softmax(x, -3), Contains("softmax: dim -3 out of range"));
  REQUIRE_THROWS_WITH(log_softmax(x, 2), Contains("log_softmax: dim 2 out of range"));
  Tensor ints = zeros({2, 3}, {.dtype = DType::Int64});
  REQUIRE_THROWS_WITH(softmax(ints, 1), Contains("softmax: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(log_softmax(ints, 1), Contains("log_softmax: expected a floating-point tensor"));

  Tensor logits = zeros({4, 10});
  Tensor target = from_vector<std::int64_t>({1, 12, 3, 4});
  REQUIRE_THROWS_WITH(cross_entropy(logits, target), Contains("cross_entropy: target 12 out of range for 10 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, from_vector<std::int32_t>({0, -5, 1, 2})),
                      Contains("cross_entropy: target -5 out of range for 10 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, from_vector<std::int64_t>({0, 10, 1, 2}), 10 + 1),
                      Contains("cross_entropy: target 10 out of range for 10 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, zeros({4})), Contains("cross_entropy: indices must be int32 or int64, got float32"));
  REQUIRE_THROWS_WITH(cross_entropy(zeros({10}), target), Contains("cross_entropy: expected a 2-d tensor, got [10]"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, from_vector<std::int64_t>({1, 2, 3})),
                      Contains("cross_entropy: target of shape [3] does not match input of shape [4,10]"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, zeros({4, 1}, {.dtype = DType::Int64})),
                      Contains("cross_entropy: target of shape [4,1] does not match"));
  REQUIRE_THROWS_WITH(cross_entropy(zeros({4, 10}, {.dtype = DType::Int64}), target),
                      Contains("cross_entropy: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, zeros({4}, {.dtype = DType::Int64}), -100, 1.5),
                      Contains("cross_entropy: label_smoothing 1.5 is outside [0, 1]"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, zeros({4}, {.dtype = DType::Int64}), -100, -0.1),
                      Contains("cross_entropy: label_smoothing -0.1 is outside [0, 1]"));

  REQUIRE_THROWS_WITH(nll_loss(logits, target), Contains("nll_loss: target 12 out of range for 10 classes"));
  REQUIRE_THROWS_WITH(nll_loss(zeros({2, 3, 4}), target), Contains("nll_loss: expected a 2-d tensor, got [2,3,4]"));
  REQUIRE_THROWS_WITH(nll_loss(logits, zeros({4})), Contains("nll_loss: indices must be int32 or int64"));
  REQUIRE_THROWS_WITH(nll_loss(logits, from_vector<std::int64_t>({1})),
                      Contains("nll_loss: target of shape [1] does not match input of shape [4,10]"));
  // float64 logits and float32 gradients do not mix in the backward kernels.
  REQUIRE_THROWS_WITH(kernels::softmax_backward(zeros({2, 2}), zeros({2, 2}, {.dtype = DType::Float64}), 1),
                      Contains("softmax_backward: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(kernels::log_softmax_backward(zeros({2, 2}), zeros({2, 3}), 1),
                      Contains("log_softmax_backward: gradient of shape [2,3] does not match output of shape [2,2]"));

  if (has_device(DeviceType::CUDA)) {
    Tensor on_gpu = zeros({4}, {.dtype = DType::Int64, .device = Device::cuda()});
    REQUIRE_THROWS_WITH(cross_entropy(logits, on_gpu), Contains("cross_entropy: tensors on cpu and cuda:0"));
    REQUIRE_THROWS_WITH(nll_loss(logits, on_gpu), Contains("nll_loss: tensors on cpu and cuda:0"));
  }
}
