// Reference Adam update: the formula of kernels/optim.h written out in double, per element.
#include "kernels/ref/optim.h"

#include <cmath>

#include "core/dtype.h"

namespace define::kernels::ref {

void adam_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double beta1, double beta2,
                 double eps, double step_size, double inv_bias_sqrt, double l2, double decay) {
  DEFINE_DISPATCH_FLOAT(p.dtype(), "adam_update", [&] {
    scalar_t* pp = p.data<scalar_t>();
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* mp = m.data<scalar_t>();
    scalar_t* vp = v.data<scalar_t>();
    for (std::int64_t i = 0; i < p.numel(); ++i) {
      const double p0 = pp[i];
      const double gi = l2 != 0 ? static_cast<double>(gp[i]) + l2 * p0 : static_cast<double>(gp[i]);
      const double mi = beta1 * static_cast<double>(mp[i]) + (1 - beta1) * gi;
      const double vi = beta2 * static_cast<double>(vp[i]) + (1 - beta2) * gi * gi;
      pp[i] = static_cast<scalar_t>(p0 * decay - step_size * mi / (std::sqrt(vi) * inv_bias_sqrt + eps));
      mp[i] = static_cast<scalar_t>(mi);
      vp[i] = static_cast<scalar_t>(vi);
    }
  });
}

}  // namespace define::kernels::ref
