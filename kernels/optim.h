// Optimizer family: fused parameter updates, one pass over a parameter's memory.
//
// Why fused: Adam written with the generic in-place kernels passes over each parameter ten times
// (scale m, add g, square g, scale v, add, sqrt, scale, add eps, divide, add to p), a visible share of
// the step of a model with a large word table (docs/results.md). One pass reads p, g, m and v and
// writes p, m and v.
//
// adam_update, per element, in the tensors' dtype T with every scalar rounded to T first (the
// roundings of the generic kernels it replaced):
//   g' = g + l2 * p                       when l2 != 0 (Adam's L2 penalty; 0 for AdamW)
//   p  = p * decay                        when decay != 1 (AdamW's 1 - lr * wd; 1 for Adam)
//   m  = m * beta1 + (1 - beta1) * g'
//   v  = v * beta2 + (1 - beta2) * (g' * g')
//   p  = p - step_size * (m / (sqrt(v) * inv_bias_sqrt + eps))
// with step_size = lr / (1 - beta1^t) and inv_bias_sqrt = 1 / sqrt(1 - beta2^t) (PyTorch's Adam).
// Backends: kernels/ref/optim.cpp (each element in double, rounded once), kernels/cpu/optim.cpp,
// kernels/cuda/optim.cu. The optimizer that calls it: nn/optim/adam.cpp.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

struct AdamHyper {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double step_size = 0;      // lr / (1 - beta1^t)
  double inv_bias_sqrt = 1;  // 1 / sqrt(1 - beta2^t)
  double l2 = 0;             // Adam's weight decay, added to the gradient
  double decay = 1;          // AdamW's factor on p, 1 - lr * weight_decay
};

// One Adam step on p, m (exp_avg) and v (exp_avg_sq) in place. p, m and v: contiguous, one shape,
// one floating dtype and device; g: the same shape, dtype and device, any layout.
void adam_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamHyper& h);

}  // namespace define::kernels
