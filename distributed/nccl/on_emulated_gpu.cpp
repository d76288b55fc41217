// The NCCL communicator on the emulated GPU: distributed/nccl/communicator.inc against the CUDA emulator's
// runtime (cuda_emu/) and the MPI-backed NCCL entry points of distributed/nccl/emulated_nccl.h, so that
// `train.distributed = nccl` with `train.device = emu` runs the GPU path's calling code in CI.
#include <cstring>
#include <memory>

#include "core/device.h"
#include "distributed/nccl/emulated_nccl.h"

#define CUDA_EMU_NO_KEYWORDS
#include "kernels/cuda/cuda_compat.cuh"

namespace define::dist::nccl_emulated {
using namespace define::dist::nccl_emu;
}

#define DEFINE_NCCL_NS nccl_emulated
#define DEFINE_NCCL_DEVICE DeviceType::Emu
#define DEFINE_NCCL_BACKEND_NS cuda_emu
#include "distributed/nccl/communicator.inc"

namespace define::dist {
std::unique_ptr<Communicator> make_nccl_emulated_communicator(Device device) {
  return nccl_emulated::make_communicator_on(device);
}
}  // namespace define::dist
