// Fast CPU reductions: the input is made contiguous, its dims are merged into alternating
// kept/reduced groups, and the common layouts (rows: reduce trailing dims; columns: reduce
// leading or middle dims) get dedicated OpenMP loops; other layouts are permuted into rows.
//
// Outputs are preallocated, contiguous, keepdim-shaped tensors (see kernels/reduce.h).
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

// out = scale * (sum of x over the dims where out has size 1 and x does not).
void sum(const Tensor& x, const Tensor& out, double scale);
// values/indices (int64): max of x along dim and the index of its first occurrence. values may
// be undefined (argmax).
void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim);
// grad_input (zero-filled, contiguous) += grad scattered along dim at indices; grad and indices
// are contiguous and keepdim-shaped.
void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim);

}  // namespace define::kernels::cpu
