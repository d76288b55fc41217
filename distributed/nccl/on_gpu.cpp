// The NCCL communicator on GPUs: distributed/nccl/communicator.inc against the CUDA runtime and NCCL.
#include <cuda_runtime.h>
#include <nccl.h>

#include "core/device.h"

#define DEFINE_NCCL_NS nccl_gpu
#define DEFINE_NCCL_DEVICE DeviceType::CUDA
#define DEFINE_NCCL_BACKEND_NS cuda
#include "distributed/nccl/communicator.inc"

namespace define::dist {
bool built_with_nccl() { return true; }
std::unique_ptr<Communicator> make_nccl_communicator(Device device) { return nccl_gpu::make_communicator_on(device); }
}  // namespace define::dist
