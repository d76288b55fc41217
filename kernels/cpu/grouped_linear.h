// Fast CPU grouped-linear kernels: one Eigen GEMM per (group, block of rows), OpenMP across them;
// deterministic dweight/dbias reductions. Called by kernels/grouped_linear.cpp with x [T, g*k_in],
// dy and y [T, g*k_out], weight [g, k_in, k_out] and bias [g, k_out], all contiguous, outputs
// preallocated. bias and the gradient outputs may be undefined (absent / not needed); x is undefined
// when dweight is.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

void grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y);
void grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias);

}  // namespace define::kernels::cpu
