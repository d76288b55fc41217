// Elementwise family: unary and binary maps (math, comparisons, the backward formulas of the
// activation functions), where and masked_fill. All of them run on a TensorIterator
// (kernels/tensor_iterator.h), which broadcasts the operands numpy-style.
//
// The entry points here validate (dtypes, devices, shapes), allocate the output and dispatch to
// kernels/ref/elementwise.h (plain loops through double, the oracle) or kernels/cpu/elementwise.h
// (typed loops with contiguous fast paths and OpenMP). The user-level, differentiable API is
// autograd/elementwise.h; these kernels record nothing.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

// One-input maps. p0/p1 are the scalar parameters of the ops that take them.
enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Abs, Tanh, Sigmoid, Relu, Gelu, Silu,
  AddScalar,   // x + p0
  MulScalar,   // x * p0
  RSubScalar,  // p0 - x
  RDivScalar,  // p0 / x
  PowScalar,   // x ^ p0
  Clamp,       // min(max(x, p0), p1)
  // Comparisons with a scalar: 1 or 0 in x's dtype (any dtype).
  EqScalar, NeScalar, LtScalar, LeScalar, GtScalar, GeScalar,
};

// Two-input maps (a and b broadcast together).
enum class BinaryOp {
  Add, Sub, Mul, Div, Maximum, Minimum, Pow,
  AddScaled,  // a + p0 * b (add_ with alpha)
  // Comparisons: 1 or 0 in the inputs' dtype (any dtype).
  Eq, Ne, Lt, Le, Gt, Ge,
  // 1 where a > b, 0.5 where a == b, 0 elsewhere: the share of maximum(a, b)'s gradient that
  // goes to a (and, with the arguments swapped, to b; minimum uses the mirror image).
  MaxWeight,
  // Backward formulas: a is the upstream gradient g, b the saved input x or output y.
  ReluBackward,       // g * (x > 0)
  GeluBackward,       // g * (Phi(x) + x * phi(x))
  SiluBackward,       // g * s * (1 + x * (1 - s)), s = sigmoid(x)
  SigmoidBackward,    // g * y * (1 - y)
  TanhBackward,       // g * (1 - y^2)
  SqrtBackward,       // g * 0.5 / y
  AbsBackward,        // g * sign(x)
  ClampBackward,      // g where p0 <= x <= p1, else 0
  PowScalarBackward,  // g * p0 * x^(p0 - 1)
};

// The user-level op name used in error messages ("add", "relu backward", ...).
const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
// Comparisons (and masked_fill/where) accept integer tensors; everything else is float-only.
bool is_comparison(UnaryOp op);
bool is_comparison(BinaryOp op);

// out = op(x), a new tensor of x's shape and dtype. `name` overrides the op name in errors
// (sub(x, s) runs as AddScalar but should complain as "sub").
Tensor unary(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0, const char* name = nullptr);
// out = op(x) into an existing tensor of x's shape (out may be x itself: in place).
// `name` overrides the op name in errors (e.g. "mul_").
void unary_into(UnaryOp op, const Tensor& out, const Tensor& x, double p0 = 0, double p1 = 0,
                const char* name = nullptr);
// out = op(a, b) with a and b broadcast together; a new tensor of the broadcast shape.
// Both operands must have the same dtype and device.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, double p0 = 0, double p1 = 0,
              const char* name = nullptr);
// Same into an existing tensor whose shape is the broadcast shape (out may alias a: in place).
void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double p0 = 0,
                 double p1 = 0, const char* name = nullptr);

// cond ? a : b, all three broadcast together. cond may have any dtype (nonzero = true);
// a and b share a dtype, which the result takes.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (broadcast to x; any dtype, nonzero = fill) is set.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// In-place form: out <- masked_fill(x, mask, value); out has x's shape and may be x.
void masked_fill_into(const Tensor& out, const Tensor& x, const Tensor& mask, double value,
                      const char* name = nullptr);

// Shorthands for backward formulas of other families.
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
inline Tensor add(const Tensor& a, double s) { return unary(UnaryOp::AddScalar, a, s); }
inline Tensor mul(const Tensor& a, double s) { return unary(UnaryOp::MulScalar, a, s); }
inline Tensor neg(const Tensor& a) { return unary(UnaryOp::Neg, a); }
inline Tensor exp(const Tensor& a) { return unary(UnaryOp::Exp, a); }
inline Tensor log(const Tensor& a) { return unary(UnaryOp::Log, a); }

}  // namespace define::kernels
