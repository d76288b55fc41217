// The NCCL communicator on the emulated GPU: dist/nccl_communicator.inc against the CUDA emulator's
// runtime (kernels/emu/) and the MPI-backed NCCL entry points of dist/nccl_emu.h, so that
// `train.distributed = nccl` with `train.device = emu` runs the GPU path's calling code in CI.
#include <cstring>
#include <memory>

#include "core/device.h"
#include "dist/nccl_emu.h"

#define CUDA_EMU_NO_KEYWORDS
#include "kernels/cuda/cuda_compat.cuh"

namespace define::dist::nccl_emulated {
using namespace define::dist::nccl_emu;
}

#define DEFINE_NCCL_NS nccl_emulated
#define DEFINE_NCCL_DEVICE DeviceType::Emu
#include "dist/nccl_communicator.inc"

namespace define::dist {
std::unique_ptr<Communicator> make_nccl_emulated_communicator(Device device) {
  return nccl_emulated::make_communicator_on(device);
}
}  // namespace define::dist
