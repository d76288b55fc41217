// The NCCL transport: collectives on the rank's GPU, on the stream the kernels run on (the
// default stream), so they are ordered after the kernels that produce the gradients without a
// host synchronisation. Host tensors (token counts, losses, checksums) go over MPI, which also
// starts the job and carries NCCL's unique id from rank 0 to the others.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/factory.h"
#include "dist/backends.h"

namespace define::dist {
namespace {

constexpr const char* kOp = "distributed";

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) fail(kOp, "{} failed: {}", call, cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) fail(kOp, "{} failed: {}", call, ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    default: fail(kOp, "dtype {} has no NCCL type here", dtype_name(t));
  }
}

// The stream every kernel of define runs on.
constexpr cudaStream_t kStream = nullptr;

class NcclReduce final : public PendingReduce {
 public:
  NcclReduce(ncclComm_t comm, Tensor& t) : t_(t) {
    if (t.numel() == 0) return;
    check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<std::size_t>(t.numel()), nccl_type(t.dtype()),
                             ncclSum, comm, kStream),
               "ncclAllReduce");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done_, kStream), "cudaEventRecord");
  }
  ~NcclReduce() override {
    if (done_) cudaEventDestroy(done_);
  }
  bool test() override {
    if (!done_) return true;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return false;
    check_cuda(e, "cudaEventQuery");
    return true;
  }
  void wait() override {
    if (done_) check_cuda(cudaEventSynchronize(done_), "cudaEventSynchronize");
  }

 private:
  Tensor t_;
  cudaEvent_t done_ = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(Device device) : host_(make_mpi_communicator()), device_(device) {
    check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
    ncclUniqueId id;
    if (host_->rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    static_assert(sizeof(ncclUniqueId) % sizeof(std::int64_t) == 0);
    Tensor bytes = empty({static_cast<std::int64_t>(sizeof(id) / sizeof(std::int64_t))}, {.dtype = DType::Int64});
    std::memcpy(bytes.raw_data(), &id, sizeof(id));
    host_->broadcast(bytes, 0);  // raw bytes: a broadcast copies, it does no arithmetic
    std::memcpy(&id, bytes.raw_data(), sizeof(id));
    check_nccl(ncclCommInitRank(&comm_, host_->world_size(), id, host_->rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  const char* backend() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int local_rank() const override { return host_->local_rank(); }

  void all_reduce_sum(Tensor& t) override {
    if (!on_gpu(t, "all_reduce")) return host_->all_reduce_sum(t);
    start_all_reduce_sum(t)->wait();
  }
  std::unique_ptr<PendingReduce> start_all_reduce_sum(Tensor& t) override {
    if (!on_gpu(t, "all_reduce")) return host_->start_all_reduce_sum(t);
    return std::make_unique<NcclReduce>(comm_, t);
  }
  void broadcast(Tensor& t, int root) override {
    if (!on_gpu(t, "broadcast")) return host_->broadcast(t, root);
    if (t.numel() == 0) return;
    check_nccl(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<std::size_t>(t.numel()), nccl_type(t.dtype()),
                             root, comm_, kStream),
               "ncclBroadcast");
    check_cuda(cudaStreamSynchronize(kStream), "cudaStreamSynchronize");
  }
  Tensor all_gather(const Tensor& t) override {
    if (!on_gpu(t, "all_gather")) return host_->all_gather(t);
    Shape shape = t.shape();
    if (shape.empty()) shape = {1};
    shape[0] *= world_size();
    Tensor out = empty(shape, {.dtype = t.dtype(), .device = t.device()});
    if (t.numel() == 0) return out;
    check_nccl(ncclAllGather(t.raw_data(), out.raw_data(), static_cast<std::size_t>(t.numel()), nccl_type(t.dtype()),
                             comm_, kStream),
               "ncclAllGather");
    check_cuda(cudaStreamSynchronize(kStream), "cudaStreamSynchronize");
    return out;
  }
  void barrier() override { host_->barrier(); }

 private:
  bool on_gpu(const Tensor& t, const char* what) {
    check_collective_tensor(t, what);
    if (!t.device().is_cuda()) return false;
    if (t.device() != device_)
      fail(kOp, "{}: the tensor is on {} but this rank's NCCL communicator is on {}", what, t.device().str(),
           device_.str());
    return true;
  }

  std::unique_ptr<Communicator> host_;
  Device device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool built_with_nccl() { return true; }
std::unique_ptr<Communicator> make_nccl_communicator(Device device) { return std::make_unique<NcclCommunicator>(device); }

}  // namespace define::dist
