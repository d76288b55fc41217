// Reference layer-norm kernels: plain loops accumulating in double (the oracle).
// Called by kernels/layer_norm.cpp with contiguous inputs viewed as [rows, D] and preallocated
// contiguous outputs. weight/bias and the gradient outputs may be undefined (absent / not needed).
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                const Tensor& rstd, double eps);
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

}  // namespace define::kernels::ref
