// The gradient reducer against the weighted sum it must produce: ranks with different token
// counts, several buckets, a parameter only one rank uses, one that no rank uses, and gradient
// accumulation over two backward passes.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "distributed/gradient_reducer.h"
#include "dist_test_util.h"

using namespace define;

namespace {

Tensor param(const Shape& shape) {
  Tensor t = zeros(shape, {.dtype = DType::Float64});
  t.set_requires_grad(true);
  return t;
}

// Rank r's upstream gradient for a parameter of n elements (a linear loss's coefficients).
std::vector<double> coeffs(int rank, std::int64_t n, double salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = salt + 0.125 * static_cast<double>(i) - rank;
  return v;
}

Tensor linear_loss(const Tensor& p, const std::vector<double>& c) {
  return sum(mul(p, reshape(from_vector(c, {p.numel()}), p.shape())));
}

}  // namespace

TEST_CASE("gradient reducer: token-weighted mean gradient over ranks, in several buckets", "[dist]") {
  auto& comm = test::comm();
  const int world = comm.world_size(), rank = comm.rank();
  const Tensor w1 = param({5}), w2 = param({3, 4}), only_rank0 = param({2}), unused = param({3});
  const optim::NamedParameters params = {{"w1", w1}, {"w2", w2}, {"only_rank0", only_rank0}, {"unused", unused}};
  dist::GradientReducer reducer(comm, params, /*bucket_bytes=*/40);  // 5 doubles: w1 alone, w2 alone, ...
  CHECK(reducer.num_buckets() >= 3);

  for (const int passes : {1, 2}) {
    CAPTURE(passes);
    for (const auto& p : params) p.second.set_grad(Tensor());
    const std::int64_t tokens = 10 + 7 * rank;
    const std::int64_t global = reducer.begin_step(tokens);
    std::int64_t expected_global = 0;
    for (int r = 0; r < world; ++r) expected_global += 10 + 7 * r;
    REQUIRE(global == expected_global);
    for (int k = 0; k < passes; ++k) {
      Tensor loss = add(linear_loss(w1, coeffs(rank, 5, 1.0 + k)), linear_loss(w2, coeffs(rank, 12, -2.0 + k)));
      if (rank == 0) loss = add(loss, linear_loss(only_rank0, coeffs(rank, 2, 3.0)));
      if (k + 1 == passes) reducer.watch_backward(loss);
      backward(loss);
    }
    reducer.finish();

    // Expected: sum over ranks and passes of (tokens_r / global) x coefficients.
    auto expected = [&](std::int64_t n, double salt, bool all_ranks, bool every_pass) {
      std::vector<double> e(static_cast<std::size_t>(n), 0.0);
      for (int r = 0; r < world; ++r) {
        if (!all_ranks && r != 0) continue;
        const double wgt = static_cast<double>(10 + 7 * r) / static_cast<double>(global);
        for (int k = 0; k < (every_pass ? passes : 1); ++k) {
          const std::vector<double> c = coeffs(r, n, salt + (every_pass ? k : 0));
          for (std::size_t i = 0; i < e.size(); ++i) e[i] += wgt * c[i];
        }
      }
      return e;
    };
    auto check = [](const Tensor& g, const std::vector<double>& e) {
      REQUIRE(g.defined());
      for (std::size_t i = 0; i < e.size(); ++i) CHECK(g.data<double>()[i] == Approx(e[i]).epsilon(1e-12));
    };
    check(w1.grad(), expected(5, 1.0, true, true));
    check(w2.grad(), expected(12, -2.0, true, true));
    // Used by rank 0 only (in every pass): defined on every rank, rank 0's weighted gradient.
    // Rank 0 adds its loss in every pass, with the same coefficients.
    std::vector<double> e0 = expected(2, 3.0, false, false);
    for (double& x : e0) x *= passes;
    check(only_rank0.grad(), e0);
    CHECK_FALSE(unused.grad().defined());  // no rank used it: as in one process
    const auto timing = reducer.timing();
    CHECK(timing.buckets_started_in_backward >= 2);  // w1's and w2's buckets started inside backward
    reducer.reset_timing();
  }
}

TEST_CASE("gradient reducer: ranks with different parameter layouts are refused by name", "[dist]") {
  auto& comm = test::comm();
  const Tensor a = param({comm.rank() == 0 ? 4 : 5});
  if (comm.world_size() == 1) {
    dist::GradientReducer ok(comm, {{"a", a}}, 1 << 20);
    CHECK(ok.num_buckets() == 1);
    return;
  }
  CHECK_THROWS_WITH((dist::GradientReducer(comm, {{"a", a}}, 1 << 20)),
                    Catch::Contains("parameter layout") && Catch::Contains("differs between ranks"));
}
