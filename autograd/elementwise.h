// Elementwise ops, differentiable (forward and backward formulas side by side in
// elementwise.cpp). Binary ops broadcast numpy-style; both tensor operands must share a dtype
// (float32 or float64) and a device. Math ops need float tensors; comparisons, where and
// masked_fill also take int32/int64 data.
#pragma once

#include "core/tensor.h"

namespace define {

// Arithmetic. The gradient of a broadcast operand is summed back to its shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// Gradient to the larger (smaller) operand; ties split it evenly, 0.5 to each.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator-(const Tensor& a);

// Unary math.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);  // gradient sign(x), 0 at 0
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);  // gradient 0 at 0
Tensor gelu(const Tensor& x);  // exact form x * Phi(x), Phi the standard normal CDF
Tensor silu(const Tensor& x);  // x * sigmoid(x) (swish)
// Gradient passes where lo <= x <= hi.
Tensor clamp(const Tensor& x, double lo, double hi);

// Comparisons: 1 or 0 in the operands' dtype. Not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

// cond ? a : b, all three broadcast together; cond any dtype (nonzero = true), not differentiable.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (broadcast to x, any dtype) is nonzero; the mask is not differentiable.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// In place. Not recorded by autograd: each refuses a target that requires grad while grad mode
// is on ("add_: in-place operation on a tensor that requires grad ..."), and bumps the target's
// version counter so that saved tensors notice the change. The other operand broadcasts to the
// target's shape (the target is never resized).
void add_(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a += alpha * b
void mul_(const Tensor& a, double s);
void mul_(const Tensor& a, const Tensor& b);
void fill_(const Tensor& a, double v);
void zero_(const Tensor& a);
void masked_fill_(const Tensor& a, const Tensor& mask, double v);

}  // namespace define
