// linear_cross_entropy: the output layer and its loss as one op (softmax family). Harness cases
// (fast CPU path = the fused kernel, against the reference backend's composition of family
// kernels; float64 Jacobians against central differences; the composition on the emulated GPU),
// with the fused kernel's tiling forced small so that a few rows and classes run through several
// row chunks and class blocks, ragged last ones included. Then: equality with
// cross_entropy(linear(...)) at a training-sized shape, thread counts, a second backward over the
// same saved logits, and the named errors.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "core/factory.h"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/cpu/linear_cross_entropy.h"
#include "support/common.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using V = const std::vector<Tensor>&;
using Catch::Contains;
using Tiles = kernels::cpu::LinearCrossEntropyTilesForTest;

namespace {

InputSpec uniform(Shape shape, double lo = -1.0, double hi = 1.0) {
  InputSpec s;
  s.shape = std::move(shape);
  s.lo = lo;
  s.hi = hi;
  return s;
}

InputSpec targets(const std::vector<std::int64_t>& t, Shape shape = {}, DType dtype = DType::Int64) {
  InputSpec s;
  s.shape = shape.empty() ? Shape{static_cast<std::int64_t>(t.size())} : std::move(shape);
  s.fill = InputSpec::Fill::Fixed;
  s.grad = false;
  s.index_dtype = dtype;
  for (std::int64_t v : t) s.values.push_back(double(v));
  return s;
}

// n targets below `classes`, spread over the classes (so every block holds some), every
// `ignore_every`-th one ignored (-100; 0: none).
std::vector<std::int64_t> spread(std::int64_t n, std::int64_t classes, std::int64_t ignore_every = 0) {
  std::vector<std::int64_t> t;
  for (std::int64_t i = 0; i < n; ++i)
    t.push_back(ignore_every > 0 && i % ignore_every == ignore_every - 1 ? -100 : (i * 37 + 5) % classes);
  return t;
}

// A fresh leaf over t's data that collects its own gradient.
Tensor leaf(const Tensor& t) {
  Tensor l = t.alias();
  l.set_requires_grad();
  return l;
}

std::vector<OpCase> cases() {
  const InputSpec x = uniform({7, 5}), w = uniform({40, 5}), b = uniform({40});
  const InputSpec t = targets(spread(7, 40, 3));
  return {
      {.name = "linear_cross_entropy/mean_bias", .inputs = {x, w, b, t},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], a[2], a[3]); }},
      {.name = "linear_cross_entropy/sum_no_bias", .inputs = {x, w, t},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], Tensor(), a[2], -100, 0.0, Reduction::Sum); }},
      {.name = "linear_cross_entropy/none_smoothing", .inputs = {x, w, b, t},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], a[2], a[3], -100, 0.1, Reduction::None); }},
      {.name = "linear_cross_entropy/mean_smoothing_int32", .inputs = {x, w, b, targets(spread(7, 40), {}, DType::Int32)},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], a[2], a[3], -100, 0.2); }},
      {.name = "linear_cross_entropy/custom_ignore_index", .inputs = {x, w, b, targets({3, 0, 3, 39, 12, 3, 7})},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], a[2], a[3], 3); }},
      {.name = "linear_cross_entropy/leading_dims_3x2", .inputs = {uniform({3, 2, 5}), w, b,
                                                                   targets(spread(6, 40, 4), {3, 2})},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], a[2], a[3]); }},
      {.name = "linear_cross_entropy/wide_logits", .inputs = {x, w, b, t},
       .forward = [](V a) { return linear_cross_entropy(mul(a[0], 8.0), a[1], a[2], a[3]); }},
      {.name = "linear_cross_entropy/one_row_one_class", .inputs = {uniform({1, 3}), uniform({1, 3}), targets({0})},
       .forward = [](V a) { return linear_cross_entropy(a[0], a[1], Tensor(), a[2]); }},
  };
}

}  // namespace

TEST_CASE("ops: linear_cross_entropy against the reference, automatic and forced small tiles",
          "[ops][harness][softmax][family:softmax]") {
  define::test::run_op_cases(cases());
  // 7 rows in chunks of 3 (3, 3, 1) and 40 classes in blocks of 16 (16, 16, 8).
  const Tiles tiles(3, 16);
  define::test::run_op_cases(cases());
}

TEST_CASE("ops: linear_cross_entropy equals cross_entropy(linear(...)) at a training-sized shape",
          "[ops][softmax][family:softmax]") {
  // 140 rows x 64 features, 3,000 classes: the automatic tiling spans several blocks. Float32 on
  // the fast CPU path against the generic ops, loss and all three gradients.
  Generator gen(7);
  const std::int64_t n = 140, in = 64, classes = 3000;
  const Tensor x0 = rand_normal({n, in}, 0, 1, {}, gen), w0 = rand_normal({classes, in}, 0, 0.2, {}, gen);
  const Tensor b0 = rand_normal({classes}, 0, 0.2, {}, gen);
  const std::vector<std::int64_t> t = spread(n, classes, 9);
  const Tensor target = from_vector(t, {n});
  for (const double smoothing : {0.0, 0.1}) {
    std::vector<Tensor> got, want;
    for (const bool fused : {true, false}) {
      const Tensor x = leaf(x0), w = leaf(w0), b = leaf(b0);
      const Tensor loss = fused ? linear_cross_entropy(x, w, b, target, -100, smoothing)
                                : cross_entropy(linear(x, w, b), target, -100, smoothing);
      backward(loss);
      (fused ? got : want) = {loss, x.grad(), w.grad(), b.grad()};
    }
    INFO("label smoothing " << smoothing);
    define::test::check_close(got[0], want[0], 1e-6, 1e-5);
    for (int k = 1; k < 4; ++k) {
      INFO("gradient " << k);
      // Gradients are O(1 / n): compare at that scale.
      define::test::check_close(got[k], want[k], 1e-7, 1e-4);
    }
  }
}

TEST_CASE("ops: linear_cross_entropy gives the same loss, dW and db for any thread count, dx to rounding",
          "[ops][softmax][family:softmax]") {
  Generator gen(3);
  const std::int64_t n = 45, in = 9, classes = 200;
  const Tensor x0 = rand_normal({n, in}, 0, 1, {}, gen), w0 = rand_normal({classes, in}, 0, 0.5, {}, gen);
  const Tensor b0 = rand_normal({classes}, 0, 0.5, {}, gen);
  const Tensor target = from_vector(spread(n, classes, 5), {n});
  const Tiles tiles(16, 32);  // 3 chunks x 7 blocks, so 1-4 threads split the blocks differently
  const int saved = omp_get_max_threads();
  std::vector<std::vector<double>> first;
  for (const int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    std::vector<std::vector<double>> runs[2];
    for (auto& run : runs) {  // twice per thread count: the same bits
      const Tensor x = leaf(x0), w = leaf(w0), b = leaf(b0);
      backward(linear_cross_entropy(x, w, b, target, -100, 0.1));
      run = {define::test::values(linear_cross_entropy(x0, w0, b0, target, -100, 0.1)),
             define::test::values(w.grad()), define::test::values(b.grad()), define::test::values(x.grad())};
    }
    INFO(threads << " threads");
    CHECK(runs[0] == runs[1]);
    if (first.empty()) first = runs[0];
    for (int k = 0; k < 3; ++k) CHECK(runs[0][k] == first[k]);
    define::test::check_close(runs[0][3], first[3], 1e-7, 1e-5);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("ops: linear_cross_entropy keeps its saved logits for a second backward",
          "[ops][softmax][family:softmax]") {
  Generator gen(5);
  const Tensor x = leaf(rand_normal({6, 4}, 0, 1, {}, gen)), w = leaf(rand_normal({30, 4}, 0, 1, {}, gen));
  const Tensor loss = linear_cross_entropy(x, w, Tensor(), from_vector(spread(6, 30), {6}));
  backward(loss, {}, {.retain_graph = true});
  const std::vector<double> once = define::test::values(w.grad());
  backward(loss);
  const std::vector<double> twice = define::test::values(w.grad());
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2 * once[i]).margin(1e-7));
}

TEST_CASE("ops: linear_cross_entropy gives the unsmoothed loss alongside, on the fused and the composed path",
          "[ops][softmax][family:softmax]") {
  Generator gen(11);
  const Tensor x = leaf(rand_normal({33, 6}, 0, 1, {}, gen)), w = rand_normal({50, 6}, 0, 1, {}, gen);
  const Tensor target = from_vector(spread(33, 50, 4), {33});
  const Tiles tiles(8, 16);  // several chunks and blocks on the fused path
  for (const kernels::Backend backend : {kernels::Backend::Cpu, kernels::Backend::Ref})
    for (const Reduction reduction : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
      const kernels::CpuBackendGuard guard(backend);
      INFO("reference backend " << (backend == kernels::Backend::Ref) << ", reduction " << int(reduction));
      Tensor unsmoothed;
      const Tensor smoothed = linear_cross_entropy(x, w, Tensor(), target, -100, 0.1, reduction, &unsmoothed);
      const Tensor plain = linear_cross_entropy(x, w, Tensor(), target, -100, 0.0, reduction);
      CHECK_FALSE(unsmoothed.requires_grad());
      define::test::check_close(unsmoothed, plain, 1e-6, 1e-6);
      CHECK(define::test::max_diff(define::test::values(smoothed), define::test::values(plain)) > 1e-3);
    }
}

TEST_CASE("ops: linear_cross_entropy names bad input", "[ops][softmax][family:softmax]") {
  const Tensor x = zeros({4, 3}), w = zeros({10, 3}), b = zeros({10});
  const Tensor t = from_vector(std::vector<std::int64_t>{1, 2, 3, 4}, {4});
  using define::test::error_of;
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, w, b, from_vector(std::vector<std::int64_t>{1, 2, 3, 10}, {4})); }),
             Contains("linear_cross_entropy: target 10 out of range for 10 classes"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, w, b, from_vector(std::vector<std::int64_t>{1, 2, 3}, {3})); }),
             Contains("target of shape [3] does not match input of shape [4,3]"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, zeros({10, 4}), b, t); }),
             Contains("input [4,3] has 3 features but weight [10,4] expects 4"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, w, zeros({9}), t); }),
             Contains("bias shape [9] does not match [10]"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, w, b, t, -100, 1.5); }),
             Contains("label_smoothing 1.5 is outside [0, 1]"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, w, b, zeros({4})); }), Contains("int32 or int64"));
  CHECK_THAT(error_of([&] { linear_cross_entropy(x, zeros({0, 3}), Tensor(), t); }), Contains("has no classes"));
}
