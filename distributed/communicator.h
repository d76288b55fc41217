// Collective communication between the processes of a data-parallel run. Library code (the
// training loop, the gradient reducer) sees only this interface; the transports are existing
// engines, not home-made ones:
//   none  one process (world size 1): every collective is the identity;
//   mpi   OpenMPI, for host tensors and the emulated GPU's (staged through host memory), and for
//         start-up of every backend (mpirun sets rank, world size and local rank);
//   nccl  NCCL on the tensors' GPU and stream, the unique id broadcast over MPI.
// Every rank must call the same collectives in the same order with tensors of the same shape and
// dtype; a mismatch that can be seen (shape, dtype) is an error naming both ranks' values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace define::dist {

// An all-reduce started by start_all_reduce_sum: wait() blocks until the tensor holds the sum;
// test() advances the transport (MPI progresses non-blocking collectives only inside its calls)
// and says whether it is done.
class PendingReduce {
 public:
  virtual ~PendingReduce() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const char* backend() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes of this machine (its GPU index)

  // In place: every rank's `t` becomes the element-wise sum (average) over ranks. float32,
  // float64 or int64, contiguous; empty tensors are allowed.
  virtual void all_reduce_sum(Tensor& t) = 0;
  void all_reduce_average(Tensor& t);
  // Starts an all-reduce sum of `t` that may overlap other work; `t` must stay alive and
  // untouched until the returned handle's wait().
  virtual std::unique_ptr<PendingReduce> start_all_reduce_sum(Tensor& t) = 0;
  // In place: every rank's `t` becomes root's.
  virtual void broadcast(Tensor& t, int root) = 0;
  // Every rank's `t` (same shape on every rank) concatenated along dim 0 in rank order; a 0-dim
  // tensor gathers into [world_size].
  virtual Tensor all_gather(const Tensor& t) = 0;
  virtual void barrier() = 0;

  // Convenience collectives on host numbers.
  double sum(double v);
  std::int64_t sum(std::int64_t v);
  // Throws on every rank, naming the ranks, unless every rank passes the same value; `what`
  // names the value in the message.
  void require_equal(std::uint64_t v, const std::string& what);
};

// "none", "mpi" or "nccl" (train.distributed). `device` is the device this rank trains on (nccl
// needs a CUDA device). A build without MPI refuses mpi and nccl with an error naming the option
// to build with; nccl also needs the CUDA backend.
std::unique_ptr<Communicator> make_communicator(const std::string& backend, Device device);

bool built_with_mpi();
bool built_with_nccl();

// How long a collective of the mpi backend waits for the other ranks before it fails naming this
// rank (train.distributed_timeout); 0: forever. Does nothing in a build without MPI.
void set_collective_timeout_s(double seconds);

// For the command line's error path: in a run of several MPI processes, prints `message` with
// this rank's number and ends every rank (MPI_Abort), so no rank waits in a collective for one
// that has left; otherwise does nothing.
void end_job_on_error(const std::string& message);

// The rank this process would have under mpirun (0 when not launched by it), read from the
// launcher's environment before any communicator exists: what a program needs to choose its
// GPU (cuda:<local rank>) before it builds its model.
int launcher_local_rank();
int launcher_world_size();

// This process's rank among the processes of its machine: the launcher's variable, or where no
// launcher set one (another MPI, a hand-written start script), MPI's own (a shared-memory split of
// the world, which initialises MPI); 0 in a build without MPI.
int node_local_rank();
// The GPU index a data-parallel rank with train.device = "cuda" takes: its local rank among
// `visible_gpus`, or the one GPU a per-rank CUDA_VISIBLE_DEVICES leaves it (`cuda_visible_devices`:
// the variable's value, nullptr when unset). Throws naming the numbers when the machine has fewer
// GPUs than ranks.
int choose_rank_gpu(int local_rank, int visible_gpus, const char* cuda_visible_devices);

}  // namespace define::dist
