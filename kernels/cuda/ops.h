// Declarations of the CUDA backend's host wrappers (kernels/cuda/<family>.cu), in two namespaces:
//   define::kernels::cuda       the kernels compiled by nvcc, for tensors on Device::cuda() (GPU);
//   define::kernels::cuda_emu   the same source compiled by g++ against the CUDA emulator, for
//                               tensors on Device::emu(); present in every build.
// Plain C++: includes no CUDA header. Callers go through the dispatching entry points in
// kernels/<family>.h, never through these directly.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/elementwise.h"

#define DEFINE_CUDA_OPS_NS cuda
#include "kernels/cuda/ops.inc"
#undef DEFINE_CUDA_OPS_NS
#define DEFINE_CUDA_OPS_NS cuda_emu
#include "kernels/cuda/ops.inc"
#undef DEFINE_CUDA_OPS_NS
