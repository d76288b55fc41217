// Declarations of the CUDA backend's host wrappers (kernels/cuda/<family>.cu), in two namespaces:
//   define::kernels::cuda       the kernels compiled by nvcc, for tensors on Device::cuda() (GPU);
//   define::kernels::cuda_emu   the same source compiled by g++ against the CUDA emulator, for
//                               tensors on Device::emu(); present in every build.
// Both declare every op family's backend contract (kernels/contracts/, listed in ops.inc), so
// DEFINE_BACKEND_CALL can call any backend with the same arguments. kernels/cuda/common.cuh
// includes this header, so every .cu file's definitions meet their declarations.
// Plain C++: includes no CUDA header. Callers go through the dispatching entry points in
// kernels/<family>.h, never through these directly.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace define::kernels::cuda {
#include "kernels/cuda/ops.inc"
}  // namespace define::kernels::cuda

namespace define::kernels::cuda_emu {
#include "kernels/cuda/ops.inc"
}  // namespace define::kernels::cuda_emu
