// Group linear transform (GLT) of DeFINE / DExTra, differentiable.
#pragma once

#include "core/tensor.h"

namespace define {

// Splits the last dim of x [..., g*k_in] into g contiguous chunks, multiplies chunk i by
// weight[i] ([k_in, k_out]) and adds bias[i] ([k_out]), and concatenates the results group-major
// (no channel shuffle): y [..., g*k_out] with
//   y[..., i*k_out + j] = sum_c x[..., i*k_in + c] * weight[i, c, j] + bias[i, j].
// weight is [g, k_in, k_out]; bias is [g, k_out] or undefined (Tensor()) for none. All groups
// run as one grouped GEMM (kernels/grouped_linear.h), forward and backward.
Tensor grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace define
