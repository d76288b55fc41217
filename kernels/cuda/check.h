// DEFINE_CUDA_CHECK(expr): evaluates a CUDA runtime call and turns a failure into a
// define::Error "cuda: <expr> failed at <file>:<line>: <cudaGetErrorString>". The library never
// aborts on a CUDA error: the caller (a training loop, a test) decides what to do.
#pragma once

#include "core/error.h"
// The standard runtime API: cuda_runtime.h under nvcc, the CPU emulator under a plain C++ compiler.
#ifndef CUDA_EMU_NO_KEYWORDS
#define CUDA_EMU_NO_KEYWORDS
#endif
#include "kernels/cuda/cuda_compat.cuh"

// In the namespace of the build (define::cuda under nvcc, define::cuda_emu in the emulator build):
// the two builds define this function differently (the real runtime's error strings or the
// emulator's), and one name for both would leave the linker to keep either (scripts/checks/check-symbols.sh).
namespace define::DEFINE_CUDA_NS::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  // Clear the thread's "last error" slot so a later cudaGetLastError() after a kernel launch
  // does not report this already-handled failure again (sticky errors stay regardless).
  (void)cudaGetLastError();
  throw ::define::Error(fmt::format("cuda: {} failed at {}:{}: {}", expr, file, line, cudaGetErrorString(err)));
}

}  // namespace define::DEFINE_CUDA_NS::detail

#define DEFINE_CUDA_CHECK(expr)                                                                  \
  do {                                                                                           \
    const cudaError_t define_cuda_check_err_ = (expr);                                           \
    if (define_cuda_check_err_ != cudaSuccess)                                                   \
      ::define::DEFINE_CUDA_NS::detail::throw_cuda_error(define_cuda_check_err_, #expr, __FILE__, __LINE__); \
  } while (0)
