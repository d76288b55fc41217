// Collectives against the values they must produce, for every dtype, odd sizes, empty and 0-dim
// tensors, host and emulated-device tensors, and the errors of mismatched calls.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "dist_test_util.h"

using namespace define;

namespace {

// Rank r's element i: distinct per rank and element, exact in float32.
double value(int rank, std::int64_t i) { return static_cast<double>(rank * 1000 + i % 997) * 0.5; }

Tensor rank_tensor(std::int64_t n, DType dtype, Device device) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] =
        dtype == DType::Int64 ? 2 * value(test::comm().rank(), i) : value(test::comm().rank(), i);
  return to_device(to_dtype(from_vector(v, {n}), dtype), device);
}

std::vector<double> host_values(const Tensor& t) {
  const Tensor h = to_dtype(to_device(t, Device::cpu()), DType::Float64);
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}

}  // namespace

TEST_CASE("collectives: all-reduce sum and average, every dtype, odd sizes, host and emulated device", "[dist]") {
  for (dist::Communicator* transport : test::transports()) {
    auto& c = *transport;
    CAPTURE(c.backend());
    const int world = c.world_size();
    for (const Device device : {Device::cpu(), Device::parse("emu:0")})
      for (const DType dtype : {DType::Float32, DType::Float64, DType::Int64})
        for (const std::int64_t n : {0, 1, 7, 1001, 65537}) {
          CAPTURE(device.str(), dtype_name(dtype), n);
          Tensor t = rank_tensor(n, dtype, device);
          c.all_reduce_sum(t);
          REQUIRE(t.device() == device);
          const std::vector<double> got = host_values(t);
          REQUIRE(got.size() == static_cast<std::size_t>(n));
          for (std::int64_t i = 0; i < n; ++i) {
            double expected = 0;
            for (int r = 0; r < world; ++r) expected += dtype == DType::Int64 ? 2 * value(r, i) : value(r, i);
            REQUIRE(got[static_cast<std::size_t>(i)] == expected);
          }
          if (dtype == DType::Int64) continue;
          Tensor a = rank_tensor(n, dtype, device);
          c.all_reduce_average(a);
          const std::vector<double> avg = host_values(a);
          for (std::int64_t i = 0; i < n; ++i) {
            double expected = 0;
            for (int r = 0; r < world; ++r) expected += value(r, i);
            REQUIRE(avg[static_cast<std::size_t>(i)] == Approx(expected / world).epsilon(1e-6));
          }
        }
  }
}

TEST_CASE("collectives: a started all-reduce completes on wait and the tensor holds the sum", "[dist]") {
  for (dist::Communicator* transport : test::transports()) {
    auto& c = *transport;
    CAPTURE(c.backend());
    Tensor a = rank_tensor(4099, DType::Float32, Device::cpu());
    Tensor b = rank_tensor(3, DType::Float64, Device::parse("emu:0"));
    auto pa = c.start_all_reduce_sum(a);
    auto pb = c.start_all_reduce_sum(b);
    pb->wait();
    pa->wait();
    CHECK(pa->test());
    const std::vector<double> va = host_values(a), vb = host_values(b);
    for (std::int64_t i : {0, 1, 4098}) {
      double expected = 0;
      for (int r = 0; r < c.world_size(); ++r) expected += value(r, i);
      CHECK(va[static_cast<std::size_t>(i)] == expected);
      if (i < 3) CHECK(vb[static_cast<std::size_t>(i)] == expected);
    }
  }
}

TEST_CASE("collectives: broadcast from every root, all-gather in rank order, barrier", "[dist]") {
  for (dist::Communicator* transport : test::transports()) {
    auto& c = *transport;
    CAPTURE(c.backend());
    const int world = c.world_size();
    for (int root = 0; root < world; ++root)
      for (const Device device : {Device::cpu(), Device::parse("emu:0")}) {
        CAPTURE(root, device.str());
        Tensor t = rank_tensor(13, DType::Float64, device);
        c.broadcast(t, root);
        const std::vector<double> got = host_values(t);
        for (std::int64_t i = 0; i < 13; ++i) REQUIRE(got[static_cast<std::size_t>(i)] == value(root, i));
        Tensor empty_t = rank_tensor(0, DType::Float32, device);
        c.broadcast(empty_t, root);
        CHECK(empty_t.numel() == 0);
      }
    for (const Device device : {Device::cpu(), Device::parse("emu:0")}) {
      const Tensor mine = reshape(rank_tensor(6, DType::Float32, device), {3, 2});
      const Tensor all = c.all_gather(mine);
      REQUIRE(all.shape() == Shape{3 * world, 2});
      CHECK(all.device() == device);
      const std::vector<double> got = host_values(all);
      for (int r = 0; r < world; ++r)
        for (std::int64_t i = 0; i < 6; ++i) REQUIRE(got[static_cast<std::size_t>(r * 6 + i)] == value(r, i));
    }
    const Tensor scalar = c.all_gather(scalar_tensor(c.rank() + 0.25, {.dtype = DType::Float64}));
    REQUIRE(scalar.shape() == Shape{world});
    for (int r = 0; r < world; ++r) CHECK(scalar.data<double>()[r] == r + 0.25);
    CHECK(c.all_gather(zeros({0, 4})).shape() == Shape{0, 4});
    c.barrier();
    CHECK(c.sum(std::int64_t{c.rank() + 1}) == world * (world + 1) / 2);
    CHECK(c.sum(0.5) == 0.5 * world);
  }
}

TEST_CASE("collectives: mismatched calls and bad tensors are errors that name the problem", "[dist]") {
  auto& c = test::comm();
  CHECK_THROWS_WITH(c.all_reduce_sum(*std::make_unique<Tensor>(zeros({2}, {.dtype = DType::Int32}))),
                    Catch::Contains("int32 is not supported"));
  Tensor strided = transpose(zeros({3, 2}), 0, 1);
  CHECK_THROWS_WITH(c.all_reduce_sum(strided), Catch::Contains("contiguous"));
  CHECK_THROWS_WITH(c.broadcast(*std::make_unique<Tensor>(zeros({1})), c.world_size()), Catch::Contains("rank"));
  if (c.world_size() > 1) {
    // Rank 0 passes 3 elements, the others 4: every rank must refuse, naming both counts.
    Tensor t = zeros({c.rank() == 0 ? 3 : 4});
    CHECK_THROWS_WITH(c.all_reduce_sum(t), Catch::Contains("rank 0 passes 3") ||
                                               Catch::Contains("rank 1 passes 4 elements of float32, rank 0 passes 3"));
    CHECK_THROWS_WITH(c.require_equal(static_cast<std::uint64_t>(c.rank()), "the rank number"),
                      Catch::Contains("the rank number differs between ranks"));
  }
  c.require_equal(42, "a constant");
  CHECK_THROWS_WITH(dist::make_communicator("gloo", Device::cpu()), Catch::Contains("expected none, mpi or nccl"));
  if (!dist::built_with_nccl())
    CHECK_THROWS_WITH(dist::make_communicator("nccl", Device::cpu()), Catch::Contains("nccl"));
  else
    CHECK_THROWS_WITH(dist::make_communicator("nccl", Device::cpu()), Catch::Contains("runs on GPUs"));
}
