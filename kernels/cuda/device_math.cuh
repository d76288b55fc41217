// Device math shared by the kernel files: the float or double C-library function for each
// element type. Always called through these names (or with ::), because define::kernels declares
// tensor-level exp/log/... that unqualified calls inside the backend namespace would find first.
// Included after common.cuh; lives in the backend namespace (cuda or cuda_emu).
#pragma once

#include <cmath>

#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

__device__ __forceinline__ float dev_exp(float x) { return ::expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return ::exp(x); }
__device__ __forceinline__ float dev_log(float x) { return ::logf(x); }
__device__ __forceinline__ double dev_log(double x) { return ::log(x); }
__device__ __forceinline__ float dev_sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double dev_sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float dev_abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double dev_abs(double x) { return ::fabs(x); }
__device__ __forceinline__ float dev_tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double dev_tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float dev_erf(float x) { return ::erff(x); }
__device__ __forceinline__ double dev_erf(double x) { return ::erf(x); }
__device__ __forceinline__ float dev_pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double dev_pow(double x, double y) { return ::pow(x, y); }

}  // namespace define::kernels::DEFINE_CUDA_NS
