// Layer norm forward with its backward formulas beside it. The forward kernel saves the row
// statistics (mean, rstd) so the backward pass starts from them.
#include "autograd/layer_norm.h"

#include "autograd/function.h"
#include "kernels/layer_norm.h"

namespace define {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  kernels::LayerNormOutputs out = kernels::layer_norm(x, weight, bias, eps);
  if (needs_grad({x, weight, bias})) {
    // With xhat = (x - mean) * rstd, g = dy * weight (or dy), D = last dim, per row:
    //   dx      = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat))
    //   dweight = sum over rows of dy * xhat
    //   dbias   = sum over rows of dy
    // One fused kernel computes the ones that are needed.
    record("layer_norm", {x, weight, bias}, {out.y},
           [sx = SavedTensor(x), sw = SavedTensor(weight), mean = out.mean, rstd = out.rstd](const BackwardArgs& a) {
             kernels::LayerNormGrads g = kernels::layer_norm_backward(
                 a.grad(), sx.get("layer_norm"), sw.get("layer_norm"), mean, rstd, a.needs(0), a.needs(1), a.needs(2));
             return std::vector<Tensor>{g.dx, g.dweight, g.dbias};
           });
  }
  return out.y;
}

}  // namespace define
