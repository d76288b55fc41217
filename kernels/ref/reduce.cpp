// Reference reductions: visit every input element once in row-major order and add it (as a
// double) into its output slot; max scans each reduced line in order.
#include "kernels/ref/reduce.h"

#include <cmath>
#include <vector>

#include "kernels/strided_loop.h"

namespace define::kernels::ref {
namespace {

// Strides that map an input position to its (contiguous) output slot: 0 along reduced dims.
Strides slot_strides(const Tensor& x, const Tensor& out) {
  Strides st = contiguous_strides(out.shape());
  for (std::size_t d = 0; d < st.size(); ++d)
    if (out.shape()[d] != x.shape()[d]) st[d] = 0;
  return st;
}

template <typename T>
void sum_typed(const Tensor& x, const Tensor& out, double scale) {
  std::vector<double> acc(static_cast<std::size_t>(out.numel()), 0.0);
  const T* px = x.data<T>();
  strided_loop2(x.shape(), x.strides(), slot_strides(x, out),
                [&](std::int64_t ox, std::int64_t slot) { acc[slot] += static_cast<double>(px[ox]); });
  T* po = out.data<T>();
  std::int64_t k = 0;
  strided_loop2(out.shape(), out.strides(), out.strides(),
                [&](std::int64_t o, std::int64_t) { po[o] = static_cast<T>(acc[k++] * scale); });
}

template <typename T>
void sum_of_squares_typed(const Tensor& x, const Tensor& out) {
  double acc = 0;
  const T* px = x.data<T>();
  strided_loop2(x.shape(), x.strides(), x.strides(), [&](std::int64_t ox, std::int64_t) {
    const double v = static_cast<double>(px[ox]);
    acc += v * v;
  });
  out.data<T>()[0] = static_cast<T>(acc);
}

template <typename T>
void max_typed(const Tensor& x, const Tensor& values, const Tensor& indices, int dim) {
  const T* px = x.data<T>();
  T* pv = values.defined() ? values.data<T>() : nullptr;
  std::int64_t* pi = indices.data<std::int64_t>();
  const std::int64_t len = x.dim() == 0 ? 1 : x.shape()[dim];
  const std::int64_t step = x.dim() == 0 ? 0 : x.strides()[dim];
  std::int64_t k = 0;
  // Visiting the output shape with x's strides gives the start of each line along dim.
  strided_loop2(indices.shape(), x.strides(), x.strides(), [&](std::int64_t start, std::int64_t) {
    double best = static_cast<double>(px[start]);
    std::int64_t best_i = 0;
    for (std::int64_t r = 1; r < len; ++r) {
      const double v = static_cast<double>(px[start + r * step]);
      if (v > best || (std::isnan(v) && !std::isnan(best))) {
        best = v;
        best_i = r;
      }
    }
    if (pv) pv[k] = static_cast<T>(best);
    pi[k] = best_i;
    ++k;
  });
}

template <typename T>
void max_backward_typed(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  const T* pg = grad.data<T>();
  const std::int64_t* pi = indices.data<std::int64_t>();
  T* px = grad_input.data<T>();
  const std::int64_t step = grad_input.dim() == 0 ? 0 : grad_input.strides()[dim];
  std::int64_t k = 0;
  strided_loop2(grad.shape(), grad_input.strides(), grad_input.strides(), [&](std::int64_t start, std::int64_t) {
    px[start + pi[k] * step] += pg[k];
    ++k;
  });
}

}  // namespace

void sum(const Tensor& x, const Tensor& out, double scale) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "sum", [&] { sum_typed<scalar_t>(x, out, scale); });
}

void sum_of_squares(const Tensor& x, const Tensor& out) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "sum_of_squares", [&] { sum_of_squares_typed<scalar_t>(x, out); });
}

void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "max", [&] { max_typed<scalar_t>(x, values, indices, dim); });
}

void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  DEFINE_DISPATCH_FLOAT(grad.dtype(), "max backward", [&] { max_backward_typed<scalar_t>(grad, indices, grad_input, dim); });
}

}  // namespace define::kernels::ref
