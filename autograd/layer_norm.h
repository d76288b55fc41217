// Layer normalisation, differentiable.
#pragma once

#include "core/tensor.h"

namespace define {

// Normalises over the last dim: (x - mean) / sqrt(var + eps) * weight + bias, with the biased
// variance. weight and bias have shape [last dim]; either may be undefined (Tensor()) to skip it.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace define
