// Dropout: harness cases (each forward builds a fresh Generator, so the finite-difference
// evaluations see the same mask), the Philox contract, statistics, and named errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/philox.h"
#include "harness/op_harness.h"
#include "support/common.h"
#include "kernels/backend.h"
#include "kernels/dropout.h"

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

Tensor dropout_seeded(const Tensor& x, double p) {
  Generator g(7);
  return dropout(x, p, true, g);
}

}  // namespace

TEST_CASE("ops: dropout", "[ops][harness][dropout][family:dropout]") {
  define::test::run_op_cases({
      {.name = "dropout/p0.3", .inputs = {spec({4, 5})}, .forward = [](V x) { return dropout_seeded(x[0], 0.3); }},
      {.name = "dropout/non_contiguous", .inputs = {spec({5, 4}, -1, 1, true)},
       .forward = [](V x) { return dropout_seeded(x[0], 0.5); }},
      {.name = "dropout/odd_size", .inputs = {spec({37})}, .forward = [](V x) { return dropout_seeded(x[0], 0.1); }},
      {.name = "dropout/p0.9_3d", .inputs = {spec({2, 3, 5})}, .forward = [](V x) { return dropout_seeded(x[0], 0.9); }},
      {.name = "dropout/p1_all_dropped", .inputs = {spec({3, 4})}, .forward = [](V x) { return dropout_seeded(x[0], 1.0); }},
  });
}

// Odd sizes for the CUDA kernel (mode emu): element counts that are not multiples of 4 (one
// thread serves one Philox block of 4 words) or of the 256-thread block, and a draw that starts
// at a non-zero offset.
TEST_CASE("ops: dropout odd sizes", "[ops][harness][dropout][family:dropout]") {
  define::test::run_op_cases({
      {.name = "dropout/1", .inputs = {spec({1})}, .forward = [](V x) { return dropout_seeded(x[0], 0.5); }},
      {.name = "dropout/31", .inputs = {spec({31})}, .forward = [](V x) { return dropout_seeded(x[0], 0.2); }},
      {.name = "dropout/33_p0.999", .inputs = {spec({33})}, .forward = [](V x) { return dropout_seeded(x[0], 0.999); }},
      {.name = "dropout/257", .inputs = {spec({257})}, .forward = [](V x) { return dropout_seeded(x[0], 0.5); }},
      {.name = "dropout/3x257_non_contiguous", .inputs = {spec({3, 257}, -1, 1, true)},
       .forward = [](V x) { return dropout_seeded(x[0], 0.4); }, .gradcheck = false},
      {.name = "dropout/1031_after_a_draw", .inputs = {spec({1031})},
       .forward =
           [](V x) {
             Generator g(21);
             dropout(ones({5}), 0.5, true, g);  // the next draw starts at offset 8
             return dropout(x[0], 0.3, true, g);
           },
       .gradcheck = false},
  });
}

TEST_CASE("dropout: element i follows the Philox contract", "[dropout][family:dropout]") {
  const double p = 0.37;
  const std::int64_t n = 1001;
  for (auto backend : {kernels::Backend::Ref, kernels::Backend::Cpu}) {
    kernels::CpuBackendGuard guard(backend);
    Generator gen(1234);
    dropout(ones({5}), p, true, gen);  // move the offset past 0 first
    const GeneratorState before = gen.state();
    REQUIRE(before.offset == 8);  // 5 words reserved, rounded up to a whole Philox block
    const auto y = values(dropout(ones({n}), p, true, gen));
    CHECK(gen.state().offset == before.offset + 1004);
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t word = philox::random_u32(before.seed, before.offset, static_cast<std::uint64_t>(i));
      const bool keep = philox::u32_to_unit_float(word) >= p;
      INFO("element " << i);
      REQUIRE(y[i] == (keep ? double(scale) : 0.0));
    }
  }
}

TEST_CASE("dropout: fast path equals the reference bit for bit, at any offset", "[dropout][family:dropout]") {
  Tensor x = rand_uniform({3, 333}, -2, 2);
  for (std::uint64_t offset : {0, 4, 6, 1003}) {
    for (double p : {0.0, 0.25, 0.999}) {
      std::vector<double> ref, fast;
      {
        kernels::CpuBackendGuard guard(kernels::Backend::Ref);
        ref = values(kernels::dropout_apply(x, p, 99, offset));
      }
      fast = values(kernels::dropout_apply(x, p, 99, offset));
      INFO("offset " << offset << ", p " << p);
      CHECK(fast == ref);
    }
  }
}

TEST_CASE("dropout: kept fraction, expected value and reproducibility", "[dropout][family:dropout]") {
  const std::int64_t n = 100000;
  for (double p : {0.1, 0.3, 0.5}) {
    Generator gen(2024);
    const auto y = values(dropout(ones({n}), p, true, gen));
    double kept = 0, sum = 0;
    for (double v : y) {
      kept += v != 0.0;
      sum += v;
    }
    INFO("p = " << p);
    CHECK(std::abs(kept / n - (1.0 - p)) < 0.01);
    CHECK(std::abs(sum / n - 1.0) < 0.01);  // inverted scaling keeps the mean
  }
  // Same (seed, offset): same mask. Next draw: a different mask. Restored state: the same again.
  Generator a(5), b(5);
  const GeneratorState start = a.state();
  const auto m1 = values(dropout(ones({999}), 0.5, true, a));
  CHECK(values(dropout(ones({999}), 0.5, true, b)) == m1);
  CHECK(values(dropout(ones({999}), 0.5, true, a)) != m1);
  a.set_state(start);
  CHECK(values(dropout(ones({999}), 0.5, true, a)) == m1);
}

TEST_CASE("dropout: identity cases, p = 1 and the backward mask", "[dropout][family:dropout]") {
  Tensor x = rand_uniform({4, 6}, -1, 1);
  Generator gen(3);
  CHECK(dropout(x, 0.5, false, gen).impl() == x.impl());  // eval: the same tensor, no copy
  CHECK(dropout(x, 0.0, true, gen).impl() == x.impl());
  CHECK(gen.state().offset == 0);  // and no randomness drawn
  for (double v : values(dropout(x, 1.0, true, gen))) CHECK(v == 0.0);
  CHECK(dropout(zeros({0, 3}), 0.5, true, gen).shape() == Shape{0, 3});

  // The gradient is the same mask and scale as the forward pass (ones in, mask * scale out).
  Tensor leaf = ones({7, 9});
  leaf.set_requires_grad();
  Tensor y = dropout(leaf, 0.4, true, gen);
  backward(y, ones({7, 9}));
  CHECK(values(leaf.grad()) == values(y));
}

TEST_CASE("dropout: bad input raises named errors", "[dropout][family:dropout]") {
  using Catch::Contains;
  Tensor x = ones({3});
  REQUIRE_THROWS_WITH(dropout(x, -0.1), Contains("dropout: probability -0.1 is outside [0, 1]"));
  REQUIRE_THROWS_WITH(dropout(x, 1.5), Contains("dropout: probability 1.5 is outside [0, 1]"));
  REQUIRE_THROWS_WITH(dropout(x, std::nan("")), Contains("dropout: probability nan is outside [0, 1]"));
  REQUIRE_THROWS_WITH(dropout(ones({3}, {.dtype = DType::Int64}), 0.5),
                      Contains("dropout: expected a floating-point tensor"));
  REQUIRE_THROWS_WITH(kernels::dropout_apply(x, 1.0, 0, 0), Contains("dropout: probability 1 is outside [0, 1)"));
}
