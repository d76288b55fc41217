// The gradient reducer against the weighted sum it must produce: ranks with different token
// counts, several buckets, a parameter only one rank uses, one that no rank uses, and gradient
// accumulation over two backward passes.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "core/float16.h"
#include "dist_test_util.h"
#include "distributed/gradient_reducer.h"

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

namespace {

// The reducer's expected result for 16-bit buckets, element by element: each rank's gradient
// rounded once to T (the weight 1/world is a power of two here, so the weighting itself is exact),
// the ranks' values added in T with one rounding per addition (two ranks: one addition, whose
// result does not depend on the order), widened back to float32.
template <typename T>
std::vector<float> rounded_sum(const std::vector<std::vector<float>>& per_rank, int world) {
  std::vector<float> out(per_rank[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    T acc = T(per_rank[0][i] / static_cast<float>(world));
    for (int r = 1; r < world; ++r)
      acc = add_stored(acc, T(per_rank[static_cast<std::size_t>(r)][i] / static_cast<float>(world)));
    out[i] = static_cast<float>(acc);
  }
  return out;
}

}  // namespace

// train.allreduce_dtype: float32 gradients travel in float16 or bfloat16 buckets, on every transport
// (MPI with host tensors, MPI with the emulated GPU's tensors, NCCL on the emulated GPU), and come
// back as float32 gradients with exactly the bits of one rounding per rank and per addition.
TEST_CASE("gradient reducer: 16-bit buckets round each rank's gradient once and each addition once", "[dist]") {
  const int world = test::comm().world_size();
  std::vector<std::pair<dist::Communicator*, Device>> cases = {{&test::comm(), Device::cpu()}};
  for (dist::Communicator* c : test::transports()) {
    if (c != &test::comm()) cases.push_back({c, Device::parse("emu:0")});  // NCCL on the emulated GPU
  }
  if (world > 1) cases.push_back({&test::comm(), Device::parse("emu:0")});  // device tensors over MPI
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    for (auto [comm, device] : cases) {
      CAPTURE(dtype_name(dt), comm->backend(), device.str());
      const std::int64_t n = 37;
      // Values with more bits than either format keeps, different on every rank.
      auto grad_of = [&](int rank) {
        std::vector<float> v(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i)
          v[static_cast<std::size_t>(i)] = 1.0f + static_cast<float>(i) / 3.0f + 0.001f * static_cast<float>(rank);
        return v;
      };
      Tensor w = to_device(zeros({n}), device);
      w.set_requires_grad(true);
      dist::GradientReducer reducer(*comm, {{"w", w}}, 1 << 20, dt);
      REQUIRE(reducer.bucket_dtype(0) == dt);
      reducer.begin_step(8);  // the same tokens on every rank: weight 1/world
      const std::vector<float> mine = grad_of(comm->rank());
      const Tensor loss = sum(mul(w, to_device(from_vector(mine, {n}), device)));
      reducer.watch_backward(loss);
      backward(loss);
      reducer.finish();
      const Tensor g = to_device(w.grad(), Device::cpu());
      REQUIRE(g.dtype() == DType::Float32);
      const std::vector<float> got(g.data<float>(), g.data<float>() + n);
      std::vector<std::vector<float>> all;
      for (int r = 0; r < world; ++r) all.push_back(grad_of(r));
      const std::vector<float> want =
          dt == DType::Float16 ? rounded_sum<Half>(all, world) : rounded_sum<BFloat16>(all, world);
      CHECK(got == want);
      // The rounding is real: the float32 sum differs from the 16-bit one somewhere.
      int differ = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        float exact = 0;
        for (int r = 0; r < world; ++r)
          exact += all[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] / static_cast<float>(world);
        differ += exact != got[static_cast<std::size_t>(i)];
      }
      CHECK(differ > n / 2);
    }
  }
  CHECK_THROWS_WITH((dist::GradientReducer(test::comm(), {{"w", param({2})}}, 1 << 20, DType::Int64)),
                    Catch::Contains("cannot be all-reduced in int64"));
}
