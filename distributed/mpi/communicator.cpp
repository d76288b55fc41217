// The MPI transport (OpenMPI): host tensors in place, device tensors (the emulated GPU's, or a
// GPU's when NCCL is not used) staged through host memory, so no CUDA-aware MPI is needed.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "core/device.h"
#include "core/error.h"
#include "core/factory.h"
#include "distributed/transports.h"
#include "distributed/mpi/runtime.h"

namespace define::dist {
namespace {

constexpr const char* kOp = "distributed";

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Float16:
    case DType::BFloat16:
      return MPI_UINT16_T;  // the bits; sum_op adds them as floats
    default:
      fail(kOp, "dtype {} has no MPI type here", dtype_name(t));
  }
}

MPI_Op sum_op(DType t) {
  if (t == DType::Float16) return mpi_float16_sum();
  if (t == DType::BFloat16) return mpi_bfloat16_sum();
  return MPI_SUM;
}

std::size_t nbytes(const Tensor& t) { return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()); }

// A tensor's bytes as MPI sees them: the tensor itself on the CPU, a host copy otherwise (copied
// back by finish()).
class HostView {
 public:
  HostView(Tensor& t, bool copy_in) : t_(t) {
    if (t.device().is_cpu() || t.numel() == 0) return;
    staging_.resize(nbytes(t));
    if (copy_in) {
      device_interface(t.device().type).synchronize(t.device().index);  // kernels that produced t have finished
      device_interface(t.device().type).copy_to_host(staging_.data(), t.raw_data(), staging_.size(), t.device().index);
    }
  }
  void* data() { return staging_.empty() ? (t_.numel() ? t_.raw_data() : nullptr) : staging_.data(); }
  void finish() {
    if (!staging_.empty())
      device_interface(t_.device().type)
          .copy_from_host(t_.raw_data(), staging_.data(), staging_.size(), t_.device().index);
  }

 private:
  Tensor t_;
  std::vector<unsigned char> staging_;
};

class MpiReduce final : public PendingReduce {
 public:
  explicit MpiReduce(Tensor& t) : t_(t), host_(t, /*copy_in=*/true) {
    if (t.numel() == 0) return;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, host_.data(), static_cast<int>(t.numel()), mpi_type(t.dtype()),
                             sum_op(t.dtype()), MPI_COMM_WORLD, &req_),
              "MPI_Iallreduce");
    active_ = true;
  }
  ~MpiReduce() override {
    // Abandoned mid-flight (an exception unwinds): the buffer must outlive the request, and an
    // MPI request cannot be cancelled portably, so the process ends here.
    if (active_ && !done_) abort_job("an all-reduce was abandoned while in flight");
  }
  bool test() override {
    if (!active_ || done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) complete();
    return done_;
  }
  void wait() override {
    if (!active_ || done_) return;
    mpi_wait(req_, "all-reduce");
    complete();
  }

 private:
  void complete() {
    done_ = true;
    host_.finish();
  }
  Tensor t_;
  HostView host_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool active_ = false, done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() { mpi_initialize(); }

  const char* backend() const override { return "mpi"; }
  int rank() const override { return mpi_world_rank(); }
  int world_size() const override { return mpi_world_size(); }
  int local_rank() const override { return mpi_local_rank(); }

  void all_reduce_sum(Tensor& t) override {
    check_collective_tensor(t, "all_reduce");
    check_same_layout(t, "all_reduce");
    MpiReduce(t).wait();
  }

  // Not checked across ranks here (a round trip per call): the gradient reducer checks its
  // bucket layout once, when it is built.
  std::unique_ptr<PendingReduce> start_all_reduce_sum(Tensor& t) override {
    check_collective_tensor(t, "all_reduce");
    return std::make_unique<MpiReduce>(t);
  }

  void broadcast(Tensor& t, int root) override {
    check_collective_tensor(t, "broadcast");
    if (root < 0 || root >= world_size()) fail(kOp, "broadcast from rank {} of {}", root, world_size());
    check_same_layout(t, "broadcast");
    if (t.numel() == 0) return;
    HostView host(t, /*copy_in=*/rank() == root);
    MPI_Request req;
    check_mpi(MPI_Ibcast(host.data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), root, MPI_COMM_WORLD, &req),
              "MPI_Ibcast");
    mpi_wait(req, "broadcast");
    host.finish();
  }

  Tensor all_gather(const Tensor& t) override {
    check_collective_tensor(t, "all_gather");
    check_same_layout(t, "all_gather");
    Shape shape = t.shape();
    if (shape.empty()) shape = {1};
    shape[0] *= world_size();
    Tensor out = empty(shape, {.dtype = t.dtype(), .device = Device::cpu()});
    if (t.numel() > 0) {
      Tensor src = t;
      HostView in(src, /*copy_in=*/true);
      MPI_Request req;
      check_mpi(MPI_Iallgather(in.data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), out.raw_data(),
                               static_cast<int>(t.numel()), mpi_type(t.dtype()), MPI_COMM_WORLD, &req),
                "MPI_Iallgather");
      mpi_wait(req, "all-gather");
    }
    return t.device().is_cpu() ? out : copy_to_device(out, t.device());
  }

  void barrier() override {
    MPI_Request req;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
    mpi_wait(req, "barrier");
  }

 private:
  // Every rank must pass the same dtype and element count: a mismatch would make MPI read or
  // write past a buffer, so it is checked (one small all-gather) and named.
  void check_same_layout(const Tensor& t, const char* what) {
    std::int64_t mine[2] = {static_cast<std::int64_t>(t.dtype()), t.numel()};
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(world_size()));
    MPI_Request req;
    check_mpi(MPI_Iallgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD, &req), "MPI_Iallgather");
    mpi_wait(req, what);
    for (int r = 0; r < world_size(); ++r)
      if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1])
        fail(kOp, "{}: rank {} passes {} elements of {}, rank {} passes {} of {}", what, rank(), mine[1],
             dtype_name(static_cast<DType>(mine[0])), r, all[2 * r + 1], dtype_name(static_cast<DType>(all[2 * r])));
  }
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace define::dist
