// Fast CPU elementwise kernels: computed in the tensors' own type, with stride-1 and
// scalar-broadcast inner loops the compiler vectorises, split across OpenMP threads by element
// range once a tensor is large enough to pay for the threads.
// Outputs are preallocated (and validated) by kernels/elementwise.cpp.
#pragma once

#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace define::kernels::cpu {

void unary(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1);
void binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value);

}  // namespace define::kernels::cpu
