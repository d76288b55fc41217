#include "kernels/float16_compute.h"

#include "kernels/backend.h"
#include "kernels/copy.h"

namespace define::kernels {

bool any_float16(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (t.defined() && is_float16(t.dtype())) return true;
  return false;
}

bool has_float16_kernels(const Tensor& t) {
  const Backend b = backend_for(t);
  return b == Backend::Cuda || b == Backend::Emu;
}

DType float16_compute_dtype(const Tensor& like) {
  return backend_for(like) == Backend::Ref ? DType::Float64 : DType::Float32;
}

Tensor widen(const Tensor& t, const Tensor& like) {
  if (!t.defined() || !is_floating(t.dtype())) return t;
  const DType c = float16_compute_dtype(like);
  return t.dtype() == c ? t : cast(t, c);
}

Tensor narrow(const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  return cast(t, dtype);
}

DType statistics_dtype(DType input) { return input == DType::Float64 ? DType::Float64 : DType::Float32; }

}  // namespace define::kernels
