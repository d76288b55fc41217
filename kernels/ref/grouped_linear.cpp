// Reference grouped-linear kernels: the defining sums, one output element at a time, in double.
#include "kernels/ref/grouped_linear.h"

namespace define::kernels::ref {

void grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  const std::int64_t g = weight.shape()[0], k_in = weight.shape()[1], k_out = weight.shape()[2];
  const std::int64_t rows = x.shape()[0];
  DEFINE_DISPATCH_FLOAT(x.dtype(), "grouped_linear", [&] {
    using T = scalar_t;
    const T* xp = x.data<T>();
    const T* w = weight.data<T>();
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    T* yp = y.data<T>();
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t i = 0; i < g; ++i)
        for (std::int64_t j = 0; j < k_out; ++j) {
          double s = b ? double(b[i * k_out + j]) : 0.0;
          for (std::int64_t c = 0; c < k_in; ++c)
            s += double(xp[t * g * k_in + i * k_in + c]) * double(w[(i * k_in + c) * k_out + j]);
          yp[t * g * k_out + i * k_out + j] = static_cast<T>(s);
        }
  });
}

void grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias) {
  const std::int64_t g = weight.shape()[0], k_in = weight.shape()[1], k_out = weight.shape()[2];
  const std::int64_t rows = dy.shape()[0];
  DEFINE_DISPATCH_FLOAT(dy.dtype(), "grouped_linear_backward", [&] {
    using T = scalar_t;
    const T* xp = x.defined() ? x.data<T>() : nullptr;  // only dweight reads x
    const T* gp = dy.data<T>();
    const T* w = weight.data<T>();
    // dx[t, i*k_in + c] = sum_j dy[t, i*k_out + j] * w[i, c, j]
    if (dx.defined())
      for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t i = 0; i < g; ++i)
          for (std::int64_t c = 0; c < k_in; ++c) {
            double s = 0;
            for (std::int64_t j = 0; j < k_out; ++j)
              s += double(gp[t * g * k_out + i * k_out + j]) * double(w[(i * k_in + c) * k_out + j]);
            dx.data<T>()[t * g * k_in + i * k_in + c] = static_cast<T>(s);
          }
    // dweight[i, c, j] = sum_t x[t, i*k_in + c] * dy[t, i*k_out + j]
    if (dweight.defined())
      for (std::int64_t i = 0; i < g; ++i)
        for (std::int64_t c = 0; c < k_in; ++c)
          for (std::int64_t j = 0; j < k_out; ++j) {
            double s = 0;
            for (std::int64_t t = 0; t < rows; ++t)
              s += double(xp[t * g * k_in + i * k_in + c]) * double(gp[t * g * k_out + i * k_out + j]);
            dweight.data<T>()[(i * k_in + c) * k_out + j] = static_cast<T>(s);
          }
    // dbias[i, j] = sum_t dy[t, i*k_out + j]
    if (dbias.defined())
      for (std::int64_t col = 0; col < g * k_out; ++col) {
        double s = 0;
        for (std::int64_t t = 0; t < rows; ++t) s += gp[t * g * k_out + col];
        dbias.data<T>()[col] = static_cast<T>(s);
      }
  });
}

}  // namespace define::kernels::ref
