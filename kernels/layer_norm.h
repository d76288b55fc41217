// Layer normalisation over the last dim: y = (x - mean) * rstd * weight + bias, with
// rstd = 1 / sqrt(var + eps) (biased variance). The forward pass returns mean and rstd per row
// so the backward pass never recomputes the statistics. weight and bias are optional
// (undefined tensors). Reference: kernels/ref/layer_norm.cpp; fast path: kernels/cpu/layer_norm.cpp.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

struct LayerNormOutputs {
  Tensor y;     // same shape as x
  Tensor mean;  // x.shape() without the last dim
  Tensor rstd;  // x.shape() without the last dim
};
LayerNormOutputs layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

// Gradients of layer_norm; each is computed only when its flag is set (undefined otherwise).
//   xhat = (x - mean) * rstd,  g = dy * weight (dy without weight)
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy
struct LayerNormGrads {
  Tensor dx, dweight, dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias);

}  // namespace define::kernels
