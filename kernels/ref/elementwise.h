// Reference elementwise kernels: every element computed in double with the textbook formula,
// one at a time, in row-major order. Slow on purpose; the oracle for the cpu and cuda paths.
// Outputs are preallocated (and validated) by kernels/elementwise.cpp.
#pragma once

#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace define::kernels::ref {

void unary(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1);
void binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value);

}  // namespace define::kernels::ref
