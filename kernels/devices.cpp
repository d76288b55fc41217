#include "kernels/devices.h"

#include "kernels/cuda/device.h"

namespace define::kernels {

bool built_with_cuda() {
#if defined(DEFINE_HAS_CUDA_KERNELS)
  return true;
#else
  return false;
#endif
}

DeviceAvailability register_devices() {
  DeviceAvailability a;
  a.emu = define::cuda_emu::register_backend();
  if (a.emu) a.emu_devices = define::cuda_emu::device_count();
#if defined(DEFINE_HAS_CUDA_KERNELS)
  if (define::cuda::register_backend()) a.cuda_devices = define::cuda::device_count();
#endif
  return a;
}

}  // namespace define::kernels
