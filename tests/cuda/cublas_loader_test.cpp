// The GPU build loads cuBLAS on the first GPU GEMM (kernels/cuda/cublas_loader.cpp): a process
// that has not asked for it has no cuBLAS mapped (CPU runs keep libcublasLt's ~120 MB out of their
// resident memory), and the entry points define defines forward to the real library once asked.
// Runs in the GPU build only (a build without the CUDA toolkit has nothing to load); needs the
// toolkit's libcublas, not a GPU: the status-name functions work without one.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#ifdef DEFINE_HAS_CUDA_KERNELS
#include <cublas_v2.h>

#include "kernels/cuda/cublas_loader.h"

namespace {

bool maps_contain(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("cuBLAS is loaded on first use, and define's entry points forward to it", "[cuda][matmul]") {
  // ctest runs each test case in a process of its own: nothing has asked for cuBLAS yet.
  CHECK_FALSE(maps_contain("libcublas"));
  // The first call loads it; the answer is the real library's (the fallback would say
  // NOT_INITIALIZED for every status).
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) == "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(define::kernels::cuda::cublas_loaded());
  CHECK(define::kernels::cuda::cublas_load_error().empty());
  CHECK(maps_contain("libcublas.so"));
}
#endif
