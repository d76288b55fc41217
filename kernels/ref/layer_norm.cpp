// Reference layer-norm kernels: two-pass statistics and every sum in double.
#include "kernels/ref/layer_norm.h"

#include <cmath>
#include <vector>

namespace define::kernels::ref {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                const Tensor& rstd, double eps) {
  const std::int64_t d = x.shape().back(), rows = x.numel() / d;
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    const T* xp = x.data<T>();
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    T* yp = y.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = xp + r * d;
      double mu = 0;
      for (std::int64_t j = 0; j < d; ++j) mu += xr[j];
      mu /= double(d);
      double var = 0;
      for (std::int64_t j = 0; j < d; ++j) var += (xr[j] - mu) * (xr[j] - mu);
      var /= double(d);
      const double rs = 1.0 / std::sqrt(var + eps);
      for (std::int64_t j = 0; j < d; ++j) {
        double v = (xr[j] - mu) * rs;
        if (w) v *= w[j];
        if (b) v += b[j];
        yp[r * d + j] = static_cast<T>(v);
      }
      mean.data<T>()[r] = static_cast<T>(mu);
      rstd.data<T>()[r] = static_cast<T>(rs);
    }
  });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const std::int64_t d = x.shape().back(), rows = x.numel() / d;
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm_backward", [&] {
    using T = scalar_t;
    const T* xp = x.data<T>();
    const T* gp = dy.data<T>();
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* mp = mean.data<T>();
    const T* rp = rstd.data<T>();
    std::vector<double> dw(d, 0.0), db(d, 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = xp + r * d;
      const T* gr = gp + r * d;
      const double mu = mp[r], rs = rp[r];
      double sum_g = 0, sum_gx = 0;  // sums of g = dy * w and of g * xhat over the row
      for (std::int64_t j = 0; j < d; ++j) {
        const double xhat = (xr[j] - mu) * rs;
        const double g = w ? double(gr[j]) * w[j] : double(gr[j]);
        sum_g += g;
        sum_gx += g * xhat;
        dw[j] += double(gr[j]) * xhat;
        db[j] += gr[j];
      }
      if (!dx.defined()) continue;
      for (std::int64_t j = 0; j < d; ++j) {
        const double xhat = (xr[j] - mu) * rs;
        const double g = w ? double(gr[j]) * w[j] : double(gr[j]);
        dx.data<T>()[r * d + j] = static_cast<T>(rs * (g - sum_g / double(d) - xhat * sum_gx / double(d)));
      }
    }
    for (std::int64_t j = 0; j < d; ++j) {
      if (dweight.defined()) dweight.data<T>()[j] = static_cast<T>(dw[j]);
      if (dbias.defined()) dbias.data<T>()[j] = static_cast<T>(db[j]);
    }
  });
}

}  // namespace define::kernels::ref
