#include "nn/locked_dropout.h"

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "core/factory.h"
#include "nn/dropout.h"

namespace define::nn {

LockedDropout::LockedDropout(double p) : Module("LockedDropout"), p_(p) {
  check_dropout_probability("LockedDropout", p);
}

Tensor locked_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (x.dim() < 2) fail("LockedDropout", "expected input [T, B, H], got {}", shape_str(x.shape()));
  check_dropout_probability("LockedDropout", p);
  if (!training || p == 0.0) return x;
  // The mask is dropout applied to ones: 0 or 1 / (1 - p), drawn once for the whole sequence and
  // broadcast over dim 0. It is not differentiable; the gradient reaches x through the product.
  Shape mask_shape = x.shape();
  mask_shape[0] = 1;
  const Tensor mask = dropout(ones(mask_shape, {x.dtype(), x.device()}), p, true, gen);
  return mul(x, mask);
}

Tensor LockedDropout::forward(const Tensor& x) const { return locked_dropout(x, p_, is_training(), generator()); }

}  // namespace define::nn
