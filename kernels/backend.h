// Kernel dispatch. Every op has up to three implementations side by side:
//   kernels/ref/<family>.cpp   plain loops, accumulating in double: the oracle for the others;
//   kernels/cpu/<family>.cpp   the fast CPU path (Eigen, OpenMP, vectorisable loops);
//   kernels/cuda/<family>.cu   CUDA kernels (also run on the CPU by the CUDA emulator).
// kernels/<family>.cpp holds the dispatching entry points: it validates arguments (shapes,
// dtypes, devices), allocates outputs, and calls the implementation for the tensors' device.
// CPU tensors use the fast path unless a thread-local switch selects the reference (tests).
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace define::kernels {

enum class Backend { Ref, Cpu, Cuda };

// Backend used for CPU tensors on this thread (Cpu by default).
Backend cpu_backend();
void set_cpu_backend(Backend b);

class CpuBackendGuard {
 public:
  explicit CpuBackendGuard(Backend b) : prev_(cpu_backend()) { set_cpu_backend(b); }
  ~CpuBackendGuard() { set_cpu_backend(prev_); }
  CpuBackendGuard(const CpuBackendGuard&) = delete;
  CpuBackendGuard& operator=(const CpuBackendGuard&) = delete;

 private:
  Backend prev_;
};

inline Backend backend_for(const Tensor& t) {
  return t.device().is_cuda() ? Backend::Cuda : cpu_backend();
}

// Checks that all defined tensors live on one device: "<op>: tensors on cpu and cuda:0".
void check_same_device(const char* op, std::initializer_list<Tensor> ts);
// Checks equal dtypes: "<op>: dtypes float32 and float64 do not match".
void check_same_dtype(const char* op, std::initializer_list<Tensor> ts);
// Checks a floating dtype: "<op>: expected a floating-point tensor, got int64".
void check_floating(const char* op, const Tensor& t);
// Checks an index dtype (int32/int64): "<op>: indices must be int32 or int64, got float32".
void check_index(const char* op, const Tensor& t);
// Checks the rank: "<op>: expected a 2-d tensor, got [2,3,4]".
void check_dim(const char* op, const Tensor& t, std::int64_t ndim);

[[noreturn]] void no_cuda_kernel(const char* op);

}  // namespace define::kernels

// Calls ref::FN, cpu::FN or cuda::FN with the given arguments, chosen by LIKE's device and the
// thread's CPU backend. In builds without CUDA kernels the CUDA arm raises a named error.
#if defined(DEFINE_HAS_CUDA_KERNELS)
#define DEFINE_CUDA_ARM(OP, FN, ...) ::define::kernels::cuda::FN(__VA_ARGS__)
#else
#define DEFINE_CUDA_ARM(OP, FN, ...) ::define::kernels::no_cuda_kernel(OP)
#endif

#define DEFINE_BACKEND_CALL(OP, LIKE, FN, ...)                                    \
  do {                                                                            \
    switch (::define::kernels::backend_for(LIKE)) {                               \
      case ::define::kernels::Backend::Ref: ::define::kernels::ref::FN(__VA_ARGS__); break; \
      case ::define::kernels::Backend::Cpu: ::define::kernels::cpu::FN(__VA_ARGS__); break; \
      case ::define::kernels::Backend::Cuda: DEFINE_CUDA_ARM(OP, FN, __VA_ARGS__); break;  \
    }                                                                             \
  } while (0)
