#include "autograd/elementwise.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/views.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace define {

using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

// Gradients are computed at the kernel level (backward runs with grad mode off), and the
// gradient of a broadcast operand is summed back to its shape.
Tensor reduce_to(const Tensor& g, const Shape& shape) { return kernels::sum_to(g, shape); }

Tensor negate_in_place(Tensor t) {
  kernels::unary_into(UnaryOp::Neg, t, t);
  return t;
}

// Unary op whose gradient is backward_op(g, s), with s the saved input (save_output = false) or
// output (save_output = true).
Tensor unary_with_grad(UnaryOp op, const Tensor& x, BinaryOp backward_op, bool save_output, double p0 = 0,
                       double p1 = 0) {
  Tensor y = kernels::unary(op, x, p0, p1);
  if (needs_grad({x})) {
    const char* name = kernels::op_name(op);
    record(name, {x}, {y}, [name, backward_op, p0, p1, saved = SavedTensor(save_output ? y : x)](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::binary(backward_op, a.grad(), saved.get(name), p0, p1)};
    });
  }
  return y;
}

// Tensor-scalar op y = scale * x + shift (in any spelling): the gradient is g * scale.
Tensor affine_scalar(const char* name, UnaryOp op, const Tensor& x, double p0, double grad_scale) {
  Tensor y = kernels::unary(op, x, p0, 0.0, name);
  if (needs_grad({x})) {
    record(name, {x}, {y}, [grad_scale](const BackwardArgs& a) {
      return std::vector<Tensor>{grad_scale == 1.0 ? a.grad() : kernels::mul(a.grad(), grad_scale)};
    });
  }
  return y;
}

Tensor compare(BinaryOp op, const Tensor& a, const Tensor& b) { return kernels::binary(op, a, b); }
Tensor compare(UnaryOp op, const Tensor& a, double s) { return kernels::unary(op, a, s); }

}  // namespace

// ---- binary arithmetic ----

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::add(a, b);
  if (needs_grad({a, b})) {
    // d(a+b)/da = d(a+b)/db = 1.
    record("add", {a, b}, {y}, [sa = a.shape(), sb = b.shape()](const BackwardArgs& g) {
      return std::vector<Tensor>{g.needs(0) ? reduce_to(g.grad(), sa) : Tensor(),
                                 g.needs(1) ? reduce_to(g.grad(), sb) : Tensor()};
    });
  }
  return y;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::sub(a, b);
  if (needs_grad({a, b})) {
    // d(a-b)/da = 1, d(a-b)/db = -1.
    record("sub", {a, b}, {y}, [sa = a.shape(), sb = b.shape()](const BackwardArgs& g) {
      return std::vector<Tensor>{g.needs(0) ? reduce_to(g.grad(), sa) : Tensor(),
                                 g.needs(1) ? reduce_to(kernels::neg(g.grad()), sb) : Tensor()};
    });
  }
  return y;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::mul(a, b);
  if (needs_grad({a, b})) {
    // d(ab)/da = b, d(ab)/db = a.
    record("mul", {a, b}, {y}, [sa = SavedTensor(a), sb = SavedTensor(b), shape_a = a.shape(),
                                shape_b = b.shape()](const BackwardArgs& g) {
      Tensor ga, gb;
      if (g.needs(0)) ga = reduce_to(kernels::mul(g.grad(), sb.get("mul")), shape_a);
      if (g.needs(1)) gb = reduce_to(kernels::mul(g.grad(), sa.get("mul")), shape_b);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return y;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::div(a, b);
  if (needs_grad({a, b})) {
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -(1/b) * y.
    record("div", {a, b}, {y}, [sb = SavedTensor(b), sy = SavedTensor(y), shape_a = a.shape(),
                                shape_b = b.shape()](const BackwardArgs& g) {
      const Tensor g_over_b = kernels::div(g.grad(), sb.get("div"));
      Tensor ga, gb;
      if (g.needs(0)) ga = reduce_to(g_over_b, shape_a);
      if (g.needs(1)) gb = reduce_to(negate_in_place(kernels::mul(g_over_b, sy.get("div"))), shape_b);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return y;
}

namespace {

// maximum/minimum: the gradient goes to the winning operand, split 0.5/0.5 on ties. `larger`
// selects maximum (a's share is MaxWeight(a, b)) or minimum (a's share is MaxWeight(b, a)).
Tensor extremum(const char* name, BinaryOp op, const Tensor& a_in, const Tensor& b_in, bool larger) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::binary(op, a, b);
  if (needs_grad({a, b})) {
    record(name, {a, b}, {y}, [=, sa = SavedTensor(a), sb = SavedTensor(b), shape_a = a.shape(),
                               shape_b = b.shape()](const BackwardArgs& g) {
      const Tensor va = sa.get(name), vb = sb.get(name);
      Tensor ga, gb;
      if (g.needs(0)) {
        const Tensor w = larger ? kernels::binary(BinaryOp::MaxWeight, va, vb) : kernels::binary(BinaryOp::MaxWeight, vb, va);
        ga = reduce_to(kernels::mul(g.grad(), w), shape_a);
      }
      if (g.needs(1)) {
        const Tensor w = larger ? kernels::binary(BinaryOp::MaxWeight, vb, va) : kernels::binary(BinaryOp::MaxWeight, va, vb);
        gb = reduce_to(kernels::mul(g.grad(), w), shape_b);
      }
      return std::vector<Tensor>{ga, gb};
    });
  }
  return y;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", BinaryOp::Maximum, a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", BinaryOp::Minimum, a, b, false); }

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  const auto promoted = autocast::promote(a_in, b_in);  // float16 + float32 -> float32
  const Tensor &a = promoted.first, &b = promoted.second;
  Tensor y = kernels::binary(BinaryOp::Pow, a, b);
  if (needs_grad({a, b})) {
    // d(a^b)/da = b * a^(b-1); d(a^b)/db = a^b * log(a), taken as 0 where a == 0 (the limit for
    // b > 0, and PyTorch's convention); NaN where a < 0.
    record("pow", {a, b}, {y}, [sa = SavedTensor(a), sb = SavedTensor(b), sy = SavedTensor(y),
                                shape_a = a.shape(), shape_b = b.shape()](const BackwardArgs& g) {
      const Tensor va = sa.get("pow"), vb = sb.get("pow");
      Tensor ga, gb;
      if (g.needs(0)) {
        const Tensor da = kernels::mul(vb, kernels::binary(BinaryOp::Pow, va, kernels::add(vb, -1.0)));
        ga = reduce_to(kernels::mul(g.grad(), da), shape_a);
      }
      if (g.needs(1)) {
        Tensor db = kernels::mul(g.grad(), kernels::mul(sy.get("pow"), kernels::log(va)));
        kernels::masked_fill_into(db, db, kernels::unary(UnaryOp::EqScalar, va, 0.0), 0.0);
        gb = reduce_to(db, shape_b);
      }
      return std::vector<Tensor>{ga, gb};
    });
  }
  return y;
}

// ---- tensor-scalar arithmetic ----

Tensor add(const Tensor& a, double s) { return affine_scalar("add", UnaryOp::AddScalar, a, s, 1.0); }
Tensor sub(const Tensor& a, double s) { return affine_scalar("sub", UnaryOp::AddScalar, a, -s, 1.0); }
Tensor mul(const Tensor& a, double s) { return affine_scalar("mul", UnaryOp::MulScalar, a, s, s); }
// Multiplies by 1/s: one rounding more than a true division, but one kernel fewer.
Tensor div(const Tensor& a, double s) { return affine_scalar("div", UnaryOp::MulScalar, a, 1.0 / s, 1.0 / s); }

Tensor pow(const Tensor& a, double exponent) {
  // d(x^e)/dx = e * x^(e-1).
  return unary_with_grad(UnaryOp::PowScalar, a, BinaryOp::PowScalarBackward, false, exponent);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return div(a, s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
Tensor operator-(double s, const Tensor& a) {
  // d(s-x)/dx = -1.
  return affine_scalar("sub", UnaryOp::RSubScalar, a, s, -1.0);
}
Tensor operator/(double s, const Tensor& a) {
  Tensor y = kernels::unary(UnaryOp::RDivScalar, a, s);
  if (needs_grad({a})) {
    // d(s/x)/dx = -s/x^2 = -y/x.
    record("div", {a}, {y}, [sa = SavedTensor(a), sy = SavedTensor(y)](const BackwardArgs& g) {
      const Tensor t = kernels::mul(kernels::div(g.grad(), sa.get("div")), sy.get("div"));
      return std::vector<Tensor>{negate_in_place(t)};
    });
  }
  return y;
}
Tensor operator-(const Tensor& a) { return neg(a); }

// ---- unary math ----

Tensor neg(const Tensor& x) { return affine_scalar("neg", UnaryOp::Neg, x, 0.0, -1.0); }

Tensor exp(const Tensor& x) {
  Tensor y = kernels::exp(x);
  if (needs_grad({x})) {
    // d exp(x)/dx = exp(x) = y.
    record("exp", {x}, {y}, [sy = SavedTensor(y)](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::mul(a.grad(), sy.get("exp"))};
    });
  }
  return y;
}

Tensor log(const Tensor& x) {
  Tensor y = kernels::log(x);
  if (needs_grad({x})) {
    // d log(x)/dx = 1/x.
    record("log", {x}, {y}, [sx = SavedTensor(x)](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::div(a.grad(), sx.get("log"))};
    });
  }
  return y;
}

// d sqrt(x)/dx = 0.5 / sqrt(x) = 0.5 / y.
Tensor sqrt(const Tensor& x) { return unary_with_grad(UnaryOp::Sqrt, x, BinaryOp::SqrtBackward, true); }
// d|x|/dx = sign(x) (0 at 0).
Tensor abs(const Tensor& x) { return unary_with_grad(UnaryOp::Abs, x, BinaryOp::AbsBackward, false); }
// d tanh(x)/dx = 1 - y^2.
Tensor tanh(const Tensor& x) { return unary_with_grad(UnaryOp::Tanh, x, BinaryOp::TanhBackward, true); }
// d sigmoid(x)/dx = y (1 - y).
Tensor sigmoid(const Tensor& x) { return unary_with_grad(UnaryOp::Sigmoid, x, BinaryOp::SigmoidBackward, true); }
// d relu(x)/dx = 1 where x > 0, else 0.
Tensor relu(const Tensor& x) { return unary_with_grad(UnaryOp::Relu, x, BinaryOp::ReluBackward, false); }
// d (x Phi(x))/dx = Phi(x) + x phi(x).
Tensor gelu(const Tensor& x) { return unary_with_grad(UnaryOp::Gelu, x, BinaryOp::GeluBackward, false); }
// d (x s(x))/dx = s + x s (1 - s).
Tensor silu(const Tensor& x) { return unary_with_grad(UnaryOp::Silu, x, BinaryOp::SiluBackward, false); }
// 1 where lo <= x <= hi (the boundaries included), else 0.
Tensor clamp(const Tensor& x, double lo, double hi) {
  if (lo > hi) fail("clamp", "lower bound {} is above upper bound {}", lo, hi);
  return unary_with_grad(UnaryOp::Clamp, x, BinaryOp::ClampBackward, false, lo, hi);
}

// ---- comparisons: not differentiable (piecewise constant) ----

Tensor eq(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, double s) { return compare(UnaryOp::EqScalar, a, s); }
Tensor ne(const Tensor& a, double s) { return compare(UnaryOp::NeScalar, a, s); }
Tensor lt(const Tensor& a, double s) { return compare(UnaryOp::LtScalar, a, s); }
Tensor le(const Tensor& a, double s) { return compare(UnaryOp::LeScalar, a, s); }
Tensor gt(const Tensor& a, double s) { return compare(UnaryOp::GtScalar, a, s); }
Tensor ge(const Tensor& a, double s) { return compare(UnaryOp::GeScalar, a, s); }

// ---- selection ----

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor y = kernels::where(cond, a, b);
  if (is_floating(y.dtype()) && needs_grad({a, b})) {
    // The gradient flows to whichever operand was picked; cond is not differentiable (the third
    // input of the node has no edge: it is never recorded as an input).
    record("where", {a, b}, {y}, [sc = SavedTensor(cond), shape_a = a.shape(), shape_b = b.shape()](const BackwardArgs& g) {
      const Tensor c = sc.get("where");
      const Tensor zero = zeros({}, {g.grad().dtype(), g.grad().device()});
      Tensor ga, gb;
      if (g.needs(0)) ga = reduce_to(kernels::where(c, g.grad(), zero), shape_a);
      if (g.needs(1)) gb = reduce_to(kernels::where(c, zero, g.grad()), shape_b);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor y = kernels::masked_fill(x, mask, value);
  if (is_floating(y.dtype()) && needs_grad({x})) {
    // Filled positions are constants: gradient 0 there, g elsewhere. The mask is not differentiable.
    record("masked_fill", {x}, {y}, [sm = SavedTensor(mask)](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::masked_fill(a.grad(), sm.get("masked_fill"), 0.0)};
    });
  }
  return y;
}

// ---- in place (never recorded) ----

void add_(const Tensor& a, const Tensor& b, double alpha) {
  check_inplace_allowed("add_", a);
  kernels::binary_into(BinaryOp::AddScaled, a, a, b, alpha, 0.0, "add_");
  a.bump_version();
}

void mul_(const Tensor& a, double s) {
  check_inplace_allowed("mul_", a);
  kernels::unary_into(UnaryOp::MulScalar, a, a, s, 0.0, "mul_");
  a.bump_version();
}

void mul_(const Tensor& a, const Tensor& b) {
  check_inplace_allowed("mul_", a);
  kernels::binary_into(BinaryOp::Mul, a, a, b, 0.0, 0.0, "mul_");
  a.bump_version();
}

void fill_(const Tensor& a, double v) {
  check_inplace_allowed("fill_", a);
  kernels::fill(a, v);
  a.bump_version();
}

void zero_(const Tensor& a) {
  check_inplace_allowed("zero_", a);
  kernels::fill(a, 0.0);
  a.bump_version();
}

void masked_fill_(const Tensor& a, const Tensor& mask, double v) {
  check_inplace_allowed("masked_fill_", a);
  kernels::masked_fill_into(a, a, mask, v, "masked_fill_");
  a.bump_version();
}

}  // namespace define
