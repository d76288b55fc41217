// Reference reductions: one pass over the input in row-major order, accumulating in double.
// The oracle for the cpu and cuda paths.
//
// Outputs are preallocated, contiguous, keepdim-shaped tensors (see kernels/reduce.h).
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

// out = scale * (sum of x over the dims where out has size 1 and x does not).
void sum(const Tensor& x, const Tensor& out, double scale);
// values/indices (int64): max of x along dim and the index of its first occurrence. values may
// be undefined (argmax).
void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim);
// grad_input (zero-filled, contiguous) += grad scattered along dim at indices; grad and indices
// are contiguous and keepdim-shaped.
void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim);

}  // namespace define::kernels::ref
