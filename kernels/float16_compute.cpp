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

bool takes_float16(const Tensor& x, std::initializer_list<Tensor> same,
                   std::initializer_list<Tensor> same_or_float32) {
  if (!has_float16_kernels(x) || !is_float16(x.dtype())) return false;
  for (const Tensor& t : same)
    if (t.defined() && t.dtype() != x.dtype()) return false;
  const Tensor* first = nullptr;
  for (const Tensor& t : same_or_float32) {
    if (!t.defined()) continue;
    if ((t.dtype() != x.dtype() && t.dtype() != DType::Float32) || (first && t.dtype() != first->dtype()))
      return false;
    first = &t;
  }
  return true;
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
