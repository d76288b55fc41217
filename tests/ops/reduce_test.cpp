// Reductions: op-harness cases over each dim, several dims, keepdim, non-contiguous inputs and
// broadcast-undoing sum_to; exact values; the cpu path's layouts against the reference at
// sizes that exercise its chunked and parallel loops; the sum of squares (gradient norms) against
// a float64 sum; error messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <omp.h>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/reduce.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using V = const std::vector<Tensor>&;

namespace {

// Shorthand builders for the InputSpecs these cases use.
InputSpec uniform(Shape s) {
  InputSpec i;
  i.shape = std::move(s);
  return i;
}
InputSpec strided(Shape s) {
  InputSpec i = uniform(std::move(s));
  i.non_contiguous = true;
  return i;
}

std::vector<double> to_vec(const Tensor& t) { return define::test::to_doubles(t); }

}  // namespace

TEST_CASE("ops: sum and mean", "[ops][harness][reduce][family:reduce]") {
  using Dims = std::vector<std::int64_t>;
  std::vector<OpCase> cases;
  struct Spec {
    std::string name;
    InputSpec in;
    Dims dims;
    bool keepdim;
  };
  const std::vector<Spec> specs = {
      {"dim0", uniform({3, 4}), {0}, false},
      {"dim1", uniform({3, 4}), {1}, false},
      {"dim_neg1_keepdim", uniform({3, 4}), {-1}, true},
      {"3d_dim0", uniform({2, 3, 4}), {0}, false},
      {"3d_dim1_middle", uniform({2, 3, 4}), {1}, false},
      {"3d_dim2", uniform({2, 3, 4}), {2}, true},
      {"3d_dims_0_2_interleaved", uniform({2, 3, 4}), {0, 2}, false},
      {"3d_dims_2_0_keepdim", uniform({2, 3, 4}), {2, 0}, true},
      {"3d_dims_0_1_leading", uniform({2, 3, 4}), {0, 1}, false},
      {"4d_dims_1_3", uniform({2, 3, 2, 3}), {1, 3}, false},
      {"all_dims_listed", uniform({2, 3, 4}), {0, 1, 2}, false},
      {"empty_dims_means_all", uniform({2, 3}), {}, true},
      {"non_contiguous_dim0", strided({4, 3}), {0}, false},
      {"non_contiguous_dim1", strided({4, 3}), {1}, true},
      {"odd_33", uniform({33}), {0}, false},
      {"size1_dims", uniform({1, 5, 1}), {0, 2}, false},
      {"scalar_input", uniform({}), {}, false},
  };
  for (const Spec& s : specs) {
    const Dims dims = s.dims;
    const bool keep = s.keepdim;
    cases.push_back({.name = "sum/" + s.name, .inputs = {s.in}, .forward = [=](V x) { return sum(x[0], dims, keep); }});
    cases.push_back({.name = "mean/" + s.name, .inputs = {s.in}, .forward = [=](V x) { return mean(x[0], dims, keep); }});
  }
  cases.push_back({.name = "sum/all", .inputs = {uniform({3, 5})}, .forward = [](V x) { return sum(x[0]); }});
  cases.push_back({.name = "mean/all_non_contiguous", .inputs = {strided({3, 5})}, .forward = [](V x) { return mean(x[0]); }});
  cases.push_back({.name = "sum/of_broadcast_product", .inputs = {uniform({3, 1}), uniform({4})},
                   .forward = [](V x) { return sum(mul(x[0], x[1]), {0}); }});
  define::test::run_op_cases(cases);
}

TEST_CASE("ops: max, argmax, sum_to", "[ops][harness][reduce][family:reduce]") {
  std::vector<OpCase> cases;
  for (std::int64_t dim : {0, 1, -1})
    for (bool keep : {false, true}) {
      const std::string tag = "dim" + std::to_string(dim) + (keep ? "_keepdim" : "");
      cases.push_back({.name = "max/" + tag, .inputs = {uniform({3, 4})}, .forward = [=](V x) { return max(x[0], dim, keep); }});
      cases.push_back({.name = "argmax/" + tag, .inputs = {uniform({3, 4})},
                       .forward = [=](V x) { return argmax(x[0], dim, keep); }, .gradcheck = false});
    }
  cases.push_back({.name = "max/3d_middle", .inputs = {uniform({2, 5, 3})}, .forward = [](V x) { return max(x[0], 1); }});
  cases.push_back({.name = "max/non_contiguous", .inputs = {strided({4, 5})}, .forward = [](V x) { return max(x[0], 0); }});
  cases.push_back({.name = "max/odd_33", .inputs = {uniform({33})}, .forward = [](V x) { return max(x[0], 0); }});
  cases.push_back({.name = "max/scalar", .inputs = {uniform({})}, .forward = [](V x) { return max(x[0], 0); }});
  cases.push_back({.name = "argmax/non_contiguous_3d", .inputs = {strided({2, 3, 4})},
                   .forward = [](V x) { return argmax(x[0], 1, true); }, .gradcheck = false});

  struct To {
    std::string name;
    Shape from, to;
    bool non_contiguous = false;
  };
  for (const To& t : std::vector<To>{{"234_to_31", {2, 3, 4}, {3, 1}},
                                     {"234_to_4", {2, 3, 4}, {4}},
                                     {"234_to_scalar", {2, 3, 4}, {}},
                                     {"234_to_131", {2, 3, 4}, {1, 3, 1}},
                                     {"34_to_14_non_contiguous", {3, 4}, {1, 4}, true},
                                     {"33_to_1", {33}, {1}},
                                     {"only_size1_dims_differ", {1, 3}, {3}}}) {
    const Shape to = t.to;
    cases.push_back({.name = "sum_to/" + t.name, .inputs = {t.non_contiguous ? strided(t.from) : uniform(t.from)},
                     .forward = [to](V x) { return sum_to(x[0], to); }});
  }
  define::test::run_op_cases(cases);
}

// Odd sizes for the CUDA kernels' boundary paths: rows of 1, 31, 33 and 257 elements (partial
// warps, sub-warp lane groups, several warps per output), columns of the same counts (partial
// blocks of outputs), several-dim and interleaved reductions, and non-contiguous views (a
// transpose that turns a row reduction into a column one, a stride-2 view). Inputs above a few
// thousand elements skip the finite-difference Jacobian (seconds each); modes cpu and emu still
// check their gradients against the reference.
TEST_CASE("ops: reductions at odd sizes", "[ops][harness][reduce][family:reduce]") {
  using Dims = std::vector<std::int64_t>;
  struct Spec {
    std::string name;
    InputSpec in;
    Dims dims;
  };
  const std::vector<Spec> sums = {
      {"1x1_nothing_reduced", uniform({1, 1}), {0, 1}},
      {"1x257_dim1", uniform({1, 257}), {1}},
      {"257x1_dim0", uniform({257, 1}), {0}},
      {"257_all", uniform({257}), {}},
      {"31x33_dim0", uniform({31, 33}), {0}},
      {"31x33_dim1", uniform({31, 33}), {1}},
      {"33x31_all", uniform({33, 31}), {}},
      {"33x257_dim0", uniform({33, 257}), {0}},
      {"33x257_dim1", uniform({33, 257}), {1}},
      {"5x33x7_middle", uniform({5, 33, 7}), {1}},
      {"7x3x31_interleaved", uniform({7, 3, 31}), {0, 2}},
      {"3x11x33_leading", uniform({3, 11, 33}), {0, 1}},
      {"31x33_non_contiguous_dim1", strided({31, 33}), {1}},
      {"33x31_non_contiguous_dim0", strided({33, 31}), {0}},
      {"33x257_non_contiguous_dim0", strided({33, 257}), {0}},
      {"257_non_contiguous_all", strided({257}), {0}},
      {"3x5x33_non_contiguous_dims_0_2", strided({3, 5, 33}), {0, 2}},
  };
  std::vector<OpCase> cases;
  for (const Spec& s : sums) {
    const Dims dims = s.dims;
    const bool small = numel_of(s.in.shape) <= 2000;
    cases.push_back({.name = "sum/" + s.name, .inputs = {s.in},
                     .forward = [=](V x) { return sum(x[0], dims); }, .gradcheck = small});
    cases.push_back({.name = "mean/" + s.name, .inputs = {s.in},
                     .forward = [=](V x) { return mean(x[0], dims, true); }, .gradcheck = small});
  }
  struct MaxSpec {
    std::string name;
    InputSpec in;
    std::int64_t dim;
  };
  const std::vector<MaxSpec> maxes = {
      {"1x257_dim0_size1", uniform({1, 257}), 0},
      {"1x257_dim1", uniform({1, 257}), 1},
      {"257_dim0", uniform({257}), 0},
      {"31x33_dim0", uniform({31, 33}), 0},
      {"31x33_dim1", uniform({31, 33}), 1},
      {"33x257_dim1", uniform({33, 257}), 1},
      {"5x33x7_middle", uniform({5, 33, 7}), 1},
      {"31x33_non_contiguous_dim0", strided({31, 33}), 0},
      {"31x33_non_contiguous_dim1", strided({31, 33}), 1},
  };
  for (const MaxSpec& s : maxes) {
    const std::int64_t dim = s.dim;
    const bool small = numel_of(s.in.shape) <= 2000;
    cases.push_back({.name = "max/" + s.name, .inputs = {s.in},
                     .forward = [=](V x) { return max(x[0], dim); }, .gradcheck = small});
    cases.push_back({.name = "argmax/" + s.name, .inputs = {s.in},
                     .forward = [=](V x) { return argmax(x[0], dim, true); }, .gradcheck = false});
  }
  // Ties everywhere (values 0..3) and a NaN: the first maximum (the first NaN) wins whichever
  // lanes and blocks found it. Not differentiable at ties, so forward only.
  InputSpec ties;
  ties.shape = {33, 37};
  ties.fill = InputSpec::Fill::Fixed;
  ties.grad = false;
  ties.dtype = DType::Float32;
  for (std::int64_t i = 0; i < 33 * 37; ++i) ties.values.push_back(static_cast<double>((i * 7) % 4));
  ties.values[5 * 37 + 20] = NAN;
  ties.values[9 * 37 + 20] = NAN;
  for (std::int64_t dim : {0, 1}) {
    cases.push_back({.name = "max/ties_and_nan_dim" + std::to_string(dim), .inputs = {ties},
                     .forward = [=](V x) { return max(x[0], dim); }, .gradcheck = false, .expect_nonfinite = true});
    cases.push_back({.name = "argmax/ties_and_nan_dim" + std::to_string(dim), .inputs = {ties},
                     .forward = [=](V x) { return argmax(x[0], dim); }, .gradcheck = false});
  }
  define::test::run_op_cases(cases);
}

TEST_CASE("reduce: exact values", "[ops][reduce][family:reduce]") {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(x).shape() == Shape{});
  CHECK(sum(x).item<float>() == 21);
  CHECK(sum(x, {0}).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(sum(x, {-1}, true).shape() == Shape{2, 1});
  CHECK(sum(x, {-1}, true).to_vector<float>() == std::vector<float>{6, 15});
  CHECK(mean(x, {1}).to_vector<float>() == std::vector<float>{2, 5});
  CHECK(mean(x).item<float>() == 3.5f);
  CHECK(sum_to(x, {3}).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(sum_to(x, {2, 1}).to_vector<float>() == std::vector<float>{6, 15});
  CHECK(sum_to(x, {2, 3}).impl() == x.impl());  // nothing to reduce: x itself

  // max/argmax: the first maximal element wins ties; its gradient goes there only.
  Tensor t = from_vector<double>({3, 1, 3, 2, 7, 7}, {2, 3}).set_requires_grad();
  CHECK(max(t, 1).to_vector<double>() == std::vector<double>{3, 7});
  CHECK(argmax(t, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1});
  CHECK(argmax(t, 0, true).shape() == Shape{1, 3});
  CHECK(argmax(t, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 1});
  CHECK(argmax(t, 1).dtype() == DType::Int64);
  CHECK_FALSE(argmax(t, 1).requires_grad());
  backward(sum(max(t, 1)));
  CHECK(t.grad().to_vector<double>() == std::vector<double>{1, 0, 0, 0, 1, 0});

  // NaN is the maximum.
  const Tensor n = from_vector<float>({1, NAN, 5});
  CHECK(argmax(n, 0).item<std::int64_t>() == 1);
  CHECK(std::isnan(max(n, 0).item<float>()));

  // Empty inputs: the sum of nothing is 0, the mean of nothing NaN.
  CHECK(sum(zeros({0, 3})).item<float>() == 0);
  CHECK(sum(zeros({0, 3}), {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(std::isnan(mean(zeros({0})).item<float>()));
  CHECK(sum(zeros({3, 0}), {1}).shape() == Shape{3});

  // float32 sums keep their accuracy over many elements (double accumulation).
  const Tensor big = full({1 << 20}, 0.1);
  CHECK(sum(big).item<float>() == Approx(104857.6).epsilon(1e-6));
}

TEST_CASE("reduce: cpu layouts vs reference", "[ops][reduce][family:reduce]") {
  // Sizes chosen to reach every path of the cpu kernel: long rows (chunked partial sums), many
  // short rows, wide and narrow columns (row-chunked), middle dims, interleaved dims.
  Generator gen(9);
  struct C {
    Shape shape;
    std::vector<std::int64_t> dims;
  };
  const std::vector<C> layouts = {
      {{70001}, {0}},          {{3, 50000}, {1}},      {{5000, 7}, {1}},     {{50000, 3}, {0}},
      {{300, 700}, {0}},       {{5, 1000, 7}, {1}},    {{4, 5, 6, 7}, {0, 2}}, {{6, 40, 300}, {0, 2}},
      {{2, 3, 4000}, {0, 1}},  {{1, 1, 1}, {1}},       {{3, 1, 20000}, {2}},
  };
  for (const C& c : layouts) {
    const Tensor x = rand_uniform(c.shape, -1, 1, {}, gen);
    for (bool transposed : {false, true}) {
      const Tensor in = transposed && x.dim() >= 2 ? transpose(x, 0, -1) : x;
      Tensor fast, ref, fast_max, ref_max, fast_idx, ref_idx;
      {
        kernels::CpuBackendGuard g(kernels::Backend::Cpu);
        fast = mean(in, c.dims);
        fast_max = max(in, c.dims[0]);
        fast_idx = argmax(in, c.dims[0]);
      }
      {
        kernels::CpuBackendGuard g(kernels::Backend::Ref);
        ref = mean(in, c.dims);
        ref_max = max(in, c.dims[0]);
        ref_idx = argmax(in, c.dims[0]);
      }
      INFO("shape " << shape_str(in.shape()) << " dims[0] " << c.dims[0]);
      const auto cmp = define::test::compare(to_vec(fast), to_vec(ref), 1e-6, 1e-5);
      CHECK(cmp.max_share <= 1.0);
      CHECK(to_vec(fast_max) == to_vec(ref_max));
      CHECK(to_vec(fast_idx) == to_vec(ref_idx));
    }
  }
  // max backward at a size that runs in parallel.
  Tensor w = rand_uniform({300, 200}, -1, 1, {}, gen).set_requires_grad();
  Tensor gw_fast, gw_ref;
  for (auto backend : {kernels::Backend::Cpu, kernels::Backend::Ref}) {
    kernels::CpuBackendGuard g(backend);
    w.set_grad(Tensor());
    backward(sum(mul(max(w, 0), 3.0)));
    (backend == kernels::Backend::Cpu ? gw_fast : gw_ref) = w.grad();
  }
  CHECK(to_vec(gw_fast) == to_vec(gw_ref));
  CHECK(sum(gw_fast).item<float>() == 600.0f);
}

TEST_CASE("reduce: sum_of_squares equals the float64 sum of squares on every CPU backend",
          "[ops][reduce][family:reduce]") {
  // Exact: small integers square and add exactly in any order.
  for (auto backend : {kernels::Backend::Cpu, kernels::Backend::Ref}) {
    kernels::CpuBackendGuard g(backend);
    const Tensor x = from_vector<float>({1, -2, 3, 4, -5, 6}, {2, 3});
    const Tensor s = kernels::sum_of_squares(x);
    CHECK(s.shape() == Shape{});
    CHECK(s.dtype() == DType::Float32);
    CHECK(s.item<float>() == 91);
    CHECK(kernels::sum_of_squares(transpose(x, 0, 1)).item<float>() == 91);  // a strided view
    CHECK(kernels::sum_of_squares(scalar_tensor(-3.0, {.dtype = DType::Float64})).item<double>() == 9);  // 0-d
    CHECK(kernels::sum_of_squares(zeros({0, 4})).item<float>() == 0);      // empty
  }
  // Against float64 arithmetic on the same values, at sizes that reach the chunked parallel loop
  // (2^14 elements per chunk): [70001], [3, 50000] transposed, float64 [257, 1031].
  Generator gen(13);
  const std::vector<Tensor> inputs = {rand_normal({70001}, 0, 2, {}, gen),
                                      transpose(rand_uniform({3, 50000}, -1, 1, {}, gen), 0, 1),
                                      rand_uniform({257, 1031}, -3, 3, {.dtype = DType::Float64}, gen)};
  for (const Tensor& x : inputs) {
    double want = 0;
    for (double v : to_vec(x)) want += v * v;
    const bool is_double = x.dtype() == DType::Float64;
    std::vector<double> got;
    for (auto backend : {kernels::Backend::Cpu, kernels::Backend::Ref}) {
      kernels::CpuBackendGuard g(backend);
      got.push_back(kernels::sum_of_squares(x).item_double());
      // And what it replaces, sum(x * x), to the output's rounding.
      const double composed = kernels::sum(mul(x, x), {}, false).item_double();
      INFO("shape " << shape_str(x.shape()) << ", reference backend " << (backend == kernels::Backend::Ref));
      CHECK(got.back() == Approx(want).epsilon(is_double ? 1e-12 : 1e-7));
      CHECK(got.back() == Approx(composed).epsilon(is_double ? 1e-12 : 1e-7));
    }
  }
  // The fast path's bits do not depend on the thread count (fixed chunks, combined in order).
  const Tensor x = rand_normal({100003}, 0, 1, {}, gen);
  const int saved = omp_get_max_threads();
  std::vector<float> by_threads;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    by_threads.push_back(kernels::sum_of_squares(x).item<float>());
  }
  omp_set_num_threads(saved);
  CHECK(by_threads[0] == by_threads[1]);
  CHECK(by_threads[0] == by_threads[2]);
}

TEST_CASE("reduce: errors", "[ops][reduce][errors][family:reduce]") {
  const Tensor x = ones({2, 3});
  REQUIRE_THROWS_WITH(sum(x, {2}), Catch::Contains("sum: dim 2 out of range for a 2-d tensor"));
  REQUIRE_THROWS_WITH(mean(x, {-3}), Catch::Contains("mean: dim -3 out of range for a 2-d tensor"));
  REQUIRE_THROWS_WITH(sum(x, {1, -1}), Catch::Contains("sum: dim -1 appears more than once"));
  REQUIRE_THROWS_WITH(max(x, 3), Catch::Contains("max: dim 3 out of range for a 2-d tensor"));
  REQUIRE_THROWS_WITH(argmax(x, -3), Catch::Contains("argmax: dim -3 out of range for a 2-d tensor"));
  REQUIRE_THROWS_WITH(max(zeros({2, 0}), 1), Catch::Contains("max: cannot reduce over dim 1 of size 0"));
  REQUIRE_THROWS_WITH(sum(ones({2}, {.dtype = DType::Int64})),
                      Catch::Contains("sum: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(max(ones({2}, {.dtype = DType::Int32}), 0),
                      Catch::Contains("max: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(sum_to(x, {4}), Catch::Contains("sum_to: cannot reduce a tensor of shape [2,3] to [4]"));
  REQUIRE_THROWS_WITH(sum_to(x, {2, 2, 3}), Catch::Contains("sum_to: cannot reduce a tensor of shape [2,3] to [2,2,3]"));
  REQUIRE_THROWS_WITH(sum_to(x, {2, 3, 1}), Catch::Contains("sum_to: cannot reduce"));
  REQUIRE_THROWS_WITH(kernels::sum_of_squares(ones({2}, {.dtype = DType::Int64})),
                      Catch::Contains("sum_of_squares: expected a floating-point tensor"));
}
