// Kernel dispatch. Every op has up to three implementations side by side:
//   kernels/ref/<family>.cpp   plain loops, accumulating in double: the oracle for the others;
//   kernels/cpu/<family>.cpp   the fast CPU path (Eigen, OpenMP, vectorisable loops);
//   kernels/cuda/<family>.cu   CUDA kernels and their host wrappers. Compiled twice: by nvcc into
//                              namespace cuda (DEFINE_CUDA builds, tensors on Device::cuda()) and
//                              by g++ against the CUDA emulator into namespace cuda_emu (every
//                              build, tensors on Device::emu()); declared in kernels/cuda/ops.h.
// The three implement one backend contract per family, declared once in
// kernels/contracts/<family>.inc: no include guard and no namespace of its own, it is included
// inside namespace ref (kernels/ref/<family>.h), cpu (kernels/cpu/<family>.h), and cuda and
// cuda_emu (kernels/cuda/ops.h). Every backend source includes its header, so a definition whose
// signature differs from the contract leaves the declared function undefined: a link error.
// Helpers that one backend alone uses stay in that backend's headers. The families are listed
// in kernels/op_families.h.
// kernels/<family>.cpp holds the dispatching entry points: it validates arguments (shapes,
// dtypes, devices), allocates outputs, and calls the implementation for the tensors' device.
// CPU tensors use the fast path unless a thread-local switch selects the reference (tests).
#pragma once

#include <initializer_list>

#include "core/tensor.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

namespace define::kernels {

enum class Backend { Ref, Cpu, Cuda, Emu };

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
  switch (t.device().type) {
    case DeviceType::CUDA: return Backend::Cuda;
    case DeviceType::Emu: return Backend::Emu;
    case DeviceType::CPU: break;
  }
  return cpu_backend();
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
[[noreturn]] void no_emulated_kernel(const char* op);

}  // namespace define::kernels

// Calls ref::FN, cpu::FN, cuda::FN or cuda_emu::FN with the given arguments, chosen by LIKE's
// device and the thread's CPU backend. In builds without nvcc the CUDA arm raises a named error
// (no tensor can live on a GPU there anyway).
// A GPU arm runs with its tensors' device current (DeviceScope), whichever device the calling
// thread had selected: kernels launch, and scratch memory is allocated, where the data is.
#if defined(DEFINE_HAS_CUDA_KERNELS)
#define DEFINE_CUDA_ARM(OP, LIKE, FN, ...)                                \
  do {                                                                    \
    const ::define::cuda::DeviceScope device_scope_((LIKE).device().index); \
    ::define::kernels::cuda::FN(__VA_ARGS__);                             \
  } while (0)
#else
#define DEFINE_CUDA_ARM(OP, LIKE, FN, ...) ::define::kernels::no_cuda_kernel(OP)
#endif
// The fuzz preset's build has the emulated device's host side but none of its kernels: its targets
// never launch one (DEFINE_NO_EMULATED_KERNELS, kernels/cuda/sources.cmake).
#if defined(DEFINE_NO_EMULATED_KERNELS)
#define DEFINE_EMU_ARM(OP, LIKE, FN, ...) ::define::kernels::no_emulated_kernel(OP)
#else
#define DEFINE_EMU_ARM(OP, LIKE, FN, ...)                                       \
  do {                                                                          \
    const ::define::cuda_emu::DeviceScope device_scope_((LIKE).device().index); \
    ::define::kernels::cuda_emu::FN(__VA_ARGS__);                               \
  } while (0)
#endif

#define DEFINE_BACKEND_CALL(OP, LIKE, FN, ...)      \
  do {                                              \
    switch (::define::kernels::backend_for(LIKE)) { \
      case ::define::kernels::Backend::Ref:         \
        ::define::kernels::ref::FN(__VA_ARGS__);    \
        break;                                      \
      case ::define::kernels::Backend::Cpu:         \
        ::define::kernels::cpu::FN(__VA_ARGS__);    \
        break;                                      \
      case ::define::kernels::Backend::Cuda:        \
        DEFINE_CUDA_ARM(OP, LIKE, FN, __VA_ARGS__); \
        break;                                      \
      case ::define::kernels::Backend::Emu:         \
        DEFINE_EMU_ARM(OP, LIKE, FN, __VA_ARGS__);  \
        break;                                      \
    }                                               \
  } while (0)
