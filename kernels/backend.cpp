#include "kernels/backend.h"

namespace define::kernels {
namespace {
thread_local Backend g_cpu_backend = Backend::Cpu;
}

Backend cpu_backend() { return g_cpu_backend; }
void set_cpu_backend(Backend b) {
  if (b == Backend::Cuda || b == Backend::Emu)
    fail("set_cpu_backend", "CPU tensors cannot use the CUDA backend (move them to a cuda or emu device)");
  g_cpu_backend = b;
}

void check_same_device(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    else if (!(t.device() == first->device()))
      fail(op, "tensors on {} and {}", first->device().str(), t.device().str());
  }
}

void check_same_dtype(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    else if (t.dtype() != first->dtype())
      fail(op, "dtypes {} and {} do not match", dtype_name(first->dtype()), dtype_name(t.dtype()));
  }
}

void check_floating(const char* op, const Tensor& t) {
  if (!is_floating(t.dtype()))
    fail(op, "expected a floating-point tensor (float32, float64, float16 or bfloat16), got {}", dtype_name(t.dtype()));
}

void check_index(const char* op, const Tensor& t) {
  if (!is_integral(t.dtype())) fail(op, "indices must be int32 or int64, got {}", dtype_name(t.dtype()));
}

void check_dim(const char* op, const Tensor& t, std::int64_t ndim) {
  if (t.dim() != ndim) fail(op, "expected a {}-d tensor, got {}", ndim, shape_str(t.shape()));
}

void no_cuda_kernel(const char* op) {
  fail(op, "no CUDA kernel in this build (configure with DEFINE_CUDA=ON and run on a GPU)");
}

void no_emulated_kernel(const char* op) {
  fail(op, "no emulated CUDA kernel in this build (the fuzz preset's; use the release or nocuda preset)");
}

}  // namespace define::kernels
