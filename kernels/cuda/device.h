// CUDA devices: discovery, selection, and the DeviceInterface that lets core allocate and copy
// tensor storage on a device (memory comes from one caching allocator per device).
//
// Declared for both backends (kernels/cuda/device_api.inc): define::cuda, the real runtime
// (nvcc builds), and define::cuda_emu, the same host code compiled against the CUDA emulator's
// runtime shim, which serves Device::emu(). This header includes no CUDA header, so host code can
// call it in any build.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/caching_allocator.h"

#define DEFINE_CUDA_DEVICE_NS cuda
#include "kernels/cuda/device_api.inc"
#undef DEFINE_CUDA_DEVICE_NS
#define DEFINE_CUDA_DEVICE_NS cuda_emu
#include "kernels/cuda/device_api.inc"
#undef DEFINE_CUDA_DEVICE_NS
