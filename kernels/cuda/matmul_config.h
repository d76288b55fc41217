// Which GEMM implementation serves tensors on a real GPU (Device::cuda()): cuBLAS (the default)
// or the backend's own tiled shared-memory kernels (kernels/cuda/matmul.cu). The emulated device
// (Device::emu()) always runs the tiled kernels, since the emulator has no cuBLAS; this setting
// changes nothing there.
//
// The choice starts from the environment variable DEFINE_CUDA_GEMM ("cublas", the default when
// unset or empty, or "tiled"), read at the first GEMM; set_cuda_gemm() overrides it for the rest
// of the process. Plain C++: includes no CUDA header.
#pragma once

#include <string>

namespace define::kernels {

enum class CudaGemm { Cublas, Tiled };

// The implementation in effect. Throws define::Error naming the variable when DEFINE_CUDA_GEMM
// holds anything but "cublas", "tiled" or nothing.
CudaGemm cuda_gemm();
// Selects the implementation for every later GEMM on a GPU (all threads). Set it while no GEMM
// runs: a concurrent call may use either implementation.
void set_cuda_gemm(CudaGemm which);

// "cublas" -> Cublas, "tiled" -> Tiled; throws define::Error "DEFINE_CUDA_GEMM: ..." otherwise.
CudaGemm parse_cuda_gemm(const std::string& name);
const char* cuda_gemm_name(CudaGemm which);

}  // namespace define::kernels
