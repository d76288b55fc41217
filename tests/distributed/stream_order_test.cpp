// Ordering of data-parallel work, on the transports and on the emulated device's streams: buckets
// issued in the same order on every rank when one rank's batch misses a parameter, collectives on
// the NCCL communicator's own stream ordered by events, a freed buffer kept from reuse while its
// collective is queued (record_stream), and each planted bug (distributed/planted_bugs.h) caught.
// Tests tagged [ranks2] need two ranks, those tagged [mpi] start MPI even in one process (the
// 1-process run leaves both out: OpenMPI's own allocations would fail its leak check).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "core/device.h"
#include "core/factory.h"
#include "distributed/gradient_reducer.h"
#include "distributed/planted_bugs.h"
#include "kernels/cuda/device.h"
#include "dist_test_util.h"

using namespace define;

namespace {

const Device kEmu = Device::parse("emu:0");

Tensor param(std::int64_t n, Device device) {
  Tensor t = to_device(zeros({n}, {.dtype = DType::Float64}), device);
  t.set_requires_grad(true);
  return t;
}

// Rank r's gradient for a parameter of n elements: a linear loss's coefficients.
std::vector<double> coeffs(int rank, std::int64_t n, double salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = salt + 0.25 * static_cast<double>(i) + rank;
  return v;
}

Tensor linear_loss(const Tensor& p, const std::vector<double>& c) {
  return sum(mul(p, to_device(from_vector(c, {p.numel()}), p.device())));
}

std::vector<double> host(const Tensor& t) {
  const Tensor h = to_device(t, Device::cpu());
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}

// A fresh NCCL communicator on the emulated GPU: the planted bugs abort theirs.
std::unique_ptr<dist::Communicator> emulated_nccl() { return dist::make_communicator("nccl", kEmu); }

struct PlantedBug {
  bool dist::PlantedBugs::*which;
  explicit PlantedBug(bool dist::PlantedBugs::*w) : which(w) { dist::planted_bugs().*which = true; }
  ~PlantedBug() { dist::planted_bugs().*which = false; }
};

// Three buckets (bucket_bytes 40, float64): [last], [band], [first], the band used by rank 0 only,
// as an adaptive-input band with no token in the other ranks' batches. Returns each rank's loss
// after the last backward and the reducer's finish().
struct BandModel {
  Tensor first, band, last;
  optim::NamedParameters params;
  explicit BandModel(Device d) : first(param(5, d)), band(param(6, d)), last(param(5, d)) {
    params = {{"first", first}, {"band", band}, {"last", last}};
  }
  // Recorded first, band, last: backward finishes last, band, first on rank 0, and last, first on
  // the others, so buckets started as they become ready go out in different orders.
  Tensor loss(int rank) const {
    Tensor l = linear_loss(first, coeffs(rank, 5, 1.0));
    if (rank == 0) l = add(l, linear_loss(band, coeffs(rank, 6, 2.0)));
    return add(l, linear_loss(last, coeffs(rank, 5, -3.0)));
  }
};

std::vector<double> weighted_sum(int world, std::int64_t n, double salt, bool rank0_only) {
  double global = 0;
  for (int r = 0; r < world; ++r) global += 10 + 7 * r;
  std::vector<double> e(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < (rank0_only ? 1 : world); ++r) {
    const std::vector<double> c = coeffs(r, n, salt);
    for (std::size_t i = 0; i < e.size(); ++i) e[i] += (10 + 7 * r) / global * c[i];
  }
  return e;
}

void run_band_step(dist::Communicator& comm, BandModel& m, dist::GradientReducer& reducer) {
  for (const auto& p : m.params) p.second.set_grad(Tensor());
  reducer.begin_step(10 + 7 * comm.rank());
  const Tensor loss = m.loss(comm.rank());
  reducer.watch_backward(loss);
  backward(loss);
  reducer.finish();
}

}  // namespace

TEST_CASE("gradient reducer: a band one rank never touches keeps every rank's buckets in order", "[dist]") {
  std::vector<std::unique_ptr<dist::Communicator>> own;
  std::vector<std::pair<dist::Communicator*, Device>> cases = {{&test::comm(), Device::cpu()}};
  if (test::comm().world_size() > 1) {
    cases.push_back({&test::comm(), kEmu});  // the emulated GPU's tensors over MPI
    own.push_back(emulated_nccl());
    cases.push_back({own.back().get(), kEmu});
  }
  for (auto [comm, device] : cases) {
    CAPTURE(comm->backend(), device.str());
    BandModel m(device);
    dist::GradientReducer reducer(*comm, m.params, /*bucket_bytes=*/40);
    REQUIRE(reducer.num_buckets() == 3);
    run_band_step(*comm, m, reducer);
    const int world = comm->world_size();
    auto check = [](const Tensor& g, const std::vector<double>& e) {
      REQUIRE(g.defined());
      const std::vector<double> v = host(g);
      for (std::size_t i = 0; i < e.size(); ++i) CHECK(v[i] == Approx(e[i]).epsilon(1e-12));
    };
    check(m.first.grad(), weighted_sum(world, 5, 1.0, false));
    check(m.last.grad(), weighted_sum(world, 5, -3.0, false));
    check(m.band.grad(), weighted_sum(world, 6, 2.0, true));
    // The band was found unused from the graph: it holds back no bucket, every bucket started in
    // backward on every rank.
    CHECK(reducer.timing().buckets_started_in_backward == 3);
  }
}

TEST_CASE("planted bug: buckets started as they become ready are reported as collectives in different orders",
          "[dist][ranks2]") {
  auto comm = emulated_nccl();
  REQUIRE(comm->world_size() == 2);
  BandModel m(kEmu);
  dist::GradientReducer reducer(*comm, m.params, /*bucket_bytes=*/40);
  {
    const PlantedBug bug(&dist::PlantedBugs::buckets_in_ready_order);
    // Rank 1 starts the band's bucket first (found unused, nothing to wait for), rank 0 the last
    // layer's.
    CHECK_THROWS_WITH(run_band_step(*comm, m, reducer),
                      Catch::Contains("collectives issued in different orders") &&
                          Catch::Contains("rank 0 issued ncclAllReduce #1 of 5 float64") &&
                          Catch::Contains("rank 1 issued ncclAllReduce #1 of 6 float64"));
  }
  // The communicator was aborted: later collectives say so instead of hanging.
  Tensor t = to_device(ones({3}, {.dtype = DType::Float64}), kEmu);
  CHECK_THROWS_WITH(comm->all_reduce_sum(t), Catch::Contains("aborted after an earlier error"));
}

TEST_CASE("planted bug: a collective not ordered after the compute stream is refused", "[dist][mpi]") {
  auto comm = emulated_nccl();
  Tensor t = to_device(ones({7}, {.dtype = DType::Float32}), kEmu);  // written on the compute stream
  {
    const PlantedBug bug(&dist::PlantedBugs::no_wait_compute_to_communication);
    CHECK_THROWS_WITH(comm->start_all_reduce_sum(t),
                      Catch::Contains("ncclAllReduce #1") && Catch::Contains("has not waited for the kernels"));
  }
  comm->all_reduce_sum(t);  // the refused call queued nothing: the communicator goes on
  CHECK(host(to_dtype(t, DType::Float64)) == std::vector<double>(7, comm->world_size()));
}

TEST_CASE("planted bug: reading a buffer whose collective was not waited for gives the unreduced values",
          "[dist][ranks2]") {
  auto comm = emulated_nccl();
  REQUIRE(comm->world_size() == 2);
  Tensor t = to_device(full({5}, 1.0 + comm->rank(), {.dtype = DType::Float64}), kEmu);
  {
    const PlantedBug bug(&dist::PlantedBugs::wait_returns_early);
    comm->start_all_reduce_sum(t)->wait();
    // The collective is still queued on the communication stream (the emulator runs it as late as
    // it may): the buffer holds this rank's own values, not the sum 3.
    CHECK(host(t) == std::vector<double>(5, 1.0 + comm->rank()));
  }
  device_interface(DeviceType::Emu).synchronize(0);  // runs the queued collective
  CHECK(host(t) == std::vector<double>(5, 3.0));
}

TEST_CASE("record_stream: a buffer freed while its collective is queued is not reused until it ran", "[dist][mpi]") {
  REQUIRE(cuda_emu::caching_allocator_enabled());  // ctest runs it with DEFINE_CUDA_CACHE=1
  auto comm = emulated_nccl();
  auto pending_blocks = [] {
    int n = 0;
    for (const auto& segment : cuda_emu::allocator(0).snapshot())
      for (const auto& block : segment.blocks) n += block.pending;
    return n;
  };
  (void)to_device(zeros({1}), kEmu);  // an allocation polls the events of blocks parked before
  REQUIRE(pending_blocks() == 0);
  Tensor t = to_device(full({1000}, 2.0, {.dtype = DType::Float32}), kEmu);
  const void* const address = t.raw_data();
  auto pending = comm->start_all_reduce_sum(t);
  t = Tensor();  // freed by the host while the all-reduce is queued
  CHECK(pending_blocks() == 1);  // parked until the communication stream has run the collective
  Tensor u = to_device(zeros({1000}, {.dtype = DType::Float32}), kEmu);
  CHECK(u.raw_data() != address);
  pending->wait();
  pending.reset();
  Tensor v = to_device(zeros({1}, {.dtype = DType::Float32}), kEmu);  // an allocation polls the events
  CHECK(pending_blocks() == 0);
}
