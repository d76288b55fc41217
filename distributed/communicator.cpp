#include "distributed/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include <fmt/format.h>

#include "core/error.h"
#include "core/factory.h"
#include "distributed/transports.h"
#include "kernels/copy.h"

namespace define::dist {
namespace {

constexpr const char* kOp = "distributed";

// One process: every collective is the identity.
class SingleProcess final : public Communicator {
 public:
  const char* backend() const override { return "none"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  void all_reduce_sum(Tensor& t) override { check_collective_tensor(t, "all_reduce"); }
  std::unique_ptr<PendingReduce> start_all_reduce_sum(Tensor& t) override {
    check_collective_tensor(t, "all_reduce");
    struct Done final : PendingReduce {
      bool test() override { return true; }
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void broadcast(Tensor& t, int root) override {
    check_collective_tensor(t, "broadcast");
    if (root != 0) fail(kOp, "broadcast from rank {} in a run of one process", root);
  }
  Tensor all_gather(const Tensor& t) override {
    check_collective_tensor(t, "all_gather");
    return t.dim() == 0 ? reshape(clone(t), {1}) : clone(t);
  }
  void barrier() override {}
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 ? static_cast<int>(n) : fallback;
}

}  // namespace

void check_collective_tensor(const Tensor& t, const char* what) {
  if (!t.defined()) fail(kOp, "{}: the tensor is undefined", what);
  if (!t.is_contiguous()) fail(kOp, "{}: the tensor must be contiguous (shape {})", what, shape_str(t.shape()));
  if (!is_floating(t.dtype()) && t.dtype() != DType::Int64)
    fail(kOp, "{}: dtype {} is not supported (float32, float64, float16, bfloat16 or int64)", what,
         dtype_name(t.dtype()));
}

void Communicator::all_reduce_average(Tensor& t) {
  all_reduce_sum(t);
  if (world_size() == 1 || t.numel() == 0) return;
  if (!is_floating(t.dtype())) fail(kOp, "all_reduce average of an {} tensor", dtype_name(t.dtype()));
  const Tensor mean = mul(t, 1.0 / world_size());
  kernels::copy_into(t, mean);
}

double Communicator::sum(double v) {
  Tensor t = scalar_tensor(v, {.dtype = DType::Float64});
  all_reduce_sum(t);
  return t.item_double();
}

std::int64_t Communicator::sum(std::int64_t v) {
  Tensor t = from_vector(std::vector<std::int64_t>{v});
  all_reduce_sum(t);
  return t.data<std::int64_t>()[0];
}

void Communicator::require_equal(std::uint64_t v, const std::string& what) {
  if (world_size() == 1) return;
  // uint64 travels as int64 bits: equality survives the reinterpretation.
  const Tensor all = all_gather(from_vector(std::vector<std::int64_t>{static_cast<std::int64_t>(v)}));
  const std::int64_t* p = all.data<std::int64_t>();
  for (int r = 1; r < world_size(); ++r)
    if (p[r] != p[0])
      fail(kOp, "{} differs between ranks: rank 0 has {:#018x}, rank {} has {:#018x}", what,
           static_cast<std::uint64_t>(p[0]), r, static_cast<std::uint64_t>(p[r]));
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend, Device device) {
  if (backend == "none") return std::make_unique<SingleProcess>();
  if (backend == "mpi" || backend == "nccl") {
    if (!built_with_mpi())
      fail(kOp,
           "train.distributed = '{}' needs a define built with MPI (install libopenmpi-dev and "
           "configure with -DDEFINE_MPI=ON); this build runs one process only",
           backend);
    if (backend == "mpi") return make_mpi_communicator();
    // nccl: the real library on GPUs, its MPI-backed emulation on the emulated GPU.
    if (device.is_emu()) return make_nccl_emulated_communicator(device);
    if (!device.is_cuda())
      fail(kOp, "train.distributed = 'nccl' runs on GPUs (or the emulated GPU); train.device is {} (use 'mpi' for it)",
           device.str());
    if (!built_with_nccl())
      fail(kOp,
           "train.distributed = 'nccl' on {} needs a define built with the CUDA backend and NCCL "
           "(DEFINE_CUDA=ON with NCCL found); use 'mpi' for CPU and emulated-device runs",
           device.str());
    return make_nccl_communicator(device);
  }
  fail(kOp, "unknown train.distributed '{}' (expected none, mpi or nccl)", backend);
}

// The launcher's local rank (OpenMPI, MPICH, Slurm), -1 when no launcher set one.
int launcher_local_rank_or_unset() {
  return env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", -1)));
}

int launcher_local_rank() { return std::max(0, launcher_local_rank_or_unset()); }

int node_local_rank() {
  const int launched = launcher_local_rank_or_unset();
  return launched >= 0 ? launched : mpi_node_local_rank();
}

int choose_rank_gpu(int local_rank, int visible_gpus, const char* cuda_visible_devices) {
  if (visible_gpus <= 0) return 0;  // training_device() says that no GPU is there
  // One GPU visible under CUDA_VISIBLE_DEVICES: a per-rank binding (a wrapper script, Slurm's
  // --gpu-bind), that GPU is this rank's whatever its local rank.
  const bool bound = cuda_visible_devices != nullptr && *cuda_visible_devices != '\0';
  if (bound && visible_gpus == 1) return 0;
  if (local_rank < visible_gpus) return local_rank;
  fail(kOp,
       "train.device = 'cuda': this process is rank {} of its machine, but it sees {} GPU(s){}; NCCL needs one GPU "
       "per rank: start at most {} rank(s) per machine, or give each rank its own GPU with CUDA_VISIBLE_DEVICES",
       local_rank, visible_gpus,
       bound ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", cuda_visible_devices) : std::string(), visible_gpus);
}
int launcher_world_size() { return env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1)); }

}  // namespace define::dist
