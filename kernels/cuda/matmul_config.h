// Which GEMM implementation serves tensors on a CUDA device: cuBLAS or the backend's own tiled
// shared-memory kernels (kernels/cuda/matmul.cu). By default a real GPU (Device::cuda()) uses
// cuBLAS and the emulated device (Device::emu()) the tiled kernels: the emulated cuBLAS
// (cuda_emu/emu_cublas.hpp) is a plain host loop, there to run the cuBLAS calling code in tests,
// while the tiled kernels are what the emulator exists to test. Selecting cuBLAS or tiled
// explicitly applies to both.
//
// The choice starts from the environment variable DEFINE_CUDA_GEMM ("cublas", "tiled", or unset /
// empty for the default), read at the first GEMM; set_cuda_gemm() overrides it for the rest of the
// process. Plain C++: includes no CUDA header.
#pragma once

#include <string>

namespace define::kernels {

enum class CudaGemm { Default, Cublas, Tiled };

// The selection in effect (Default unless DEFINE_CUDA_GEMM or set_cuda_gemm chose one). Throws
// define::Error naming the variable when DEFINE_CUDA_GEMM holds anything but "cublas", "tiled" or
// nothing.
CudaGemm cuda_gemm();
// Selects the implementation for every later GEMM on a CUDA device (all threads); Default restores
// the per-device default. Set it while no GEMM runs: a concurrent call may use either one.
void set_cuda_gemm(CudaGemm which);
// What serves a GEMM now: cuBLAS or tiled, never Default. `emulated`: on the emulated device.
CudaGemm cuda_gemm_in_effect(bool emulated);

// "cublas" -> Cublas, "tiled" -> Tiled; throws define::Error "DEFINE_CUDA_GEMM: ..." otherwise.
CudaGemm parse_cuda_gemm(const std::string& name);
const char* cuda_gemm_name(CudaGemm which);

// Selects `which` for a scope and then restores the selection it replaced (Default included).
class CudaGemmGuard {
 public:
  explicit CudaGemmGuard(CudaGemm which) : previous_(cuda_gemm()) { set_cuda_gemm(which); }
  ~CudaGemmGuard() { set_cuda_gemm(previous_); }
  CudaGemmGuard(const CudaGemmGuard&) = delete;
  CudaGemmGuard& operator=(const CudaGemmGuard&) = delete;

 private:
  CudaGemm previous_;
};

}  // namespace define::kernels
