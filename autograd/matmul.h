// Matrix products, differentiable. Backward formulas sit next to each forward in matmul.cpp.
#pragma once

#include "core/tensor.h"

namespace define {

// numpy matmul semantics: 2-d x 2-d is the matrix product; a 1-d operand is treated as a row
// (left) or column (right) vector whose added dim is removed again (1-d x 1-d is a 0-d dot
// product); operands with more dims are stacks of matrices whose batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

// Batched matrix product: [B, M, K] x [B, K, N] -> [B, M, N] (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);

// y = x @ weight^T + bias for x [..., in], weight [out, in], bias [out] or undefined -> [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace define
