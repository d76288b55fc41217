// Reference elementwise kernels: each element is converted to double, mapped with the plain
// formula, and converted back. No fast paths, no threads.
#include "kernels/ref/elementwise.h"

#include <algorithm>
#include <cmath>

#include "kernels/tensor_iterator.h"

namespace define::kernels::ref {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x * kInvSqrt2)); }
double normal_pdf(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }

double apply(UnaryOp op, double x, double p0, double p1) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Abs: return std::abs(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Sigmoid: return sigmoid(x);
    case UnaryOp::Relu: return x < 0 ? 0.0 : x;
    case UnaryOp::Gelu: return x * normal_cdf(x);
    case UnaryOp::Silu: return x * sigmoid(x);
    case UnaryOp::AddScalar: return x + p0;
    case UnaryOp::MulScalar: return x * p0;
    case UnaryOp::RSubScalar: return p0 - x;
    case UnaryOp::RDivScalar: return p0 / x;
    case UnaryOp::PowScalar: return std::pow(x, p0);
    case UnaryOp::Clamp: return std::min(std::max(x, p0), p1);
    case UnaryOp::EqScalar: return x == p0;
    case UnaryOp::NeScalar: return x != p0;
    case UnaryOp::LtScalar: return x < p0;
    case UnaryOp::LeScalar: return x <= p0;
    case UnaryOp::GtScalar: return x > p0;
    case UnaryOp::GeScalar: return x >= p0;
  }
  return 0.0;
}

double apply(BinaryOp op, double a, double b, double p0, double p1) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return (a > b || std::isnan(a)) ? a : b;
    case BinaryOp::Minimum: return (a < b || std::isnan(a)) ? a : b;
    case BinaryOp::Pow: return std::pow(a, b);
    case BinaryOp::AddScaled: return a + p0 * b;
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    case BinaryOp::MaxWeight: return a > b ? 1.0 : (a == b ? 0.5 : 0.0);
    case BinaryOp::ReluBackward: return b > 0 ? a : 0.0;
    case BinaryOp::GeluBackward: return a * (normal_cdf(b) + b * normal_pdf(b));
    case BinaryOp::SiluBackward: {
      const double s = sigmoid(b);
      return a * s * (1.0 + b * (1.0 - s));
    }
    case BinaryOp::SigmoidBackward: return a * b * (1.0 - b);
    case BinaryOp::TanhBackward: return a * (1.0 - b * b);
    case BinaryOp::SqrtBackward: return a * 0.5 / b;
    case BinaryOp::AbsBackward: return b > 0 ? a : (b < 0 ? -a : 0.0);
    case BinaryOp::ClampBackward: return (b >= p0 && b <= p1) ? a : 0.0;
    case BinaryOp::PowScalarBackward: return p0 == 0 ? 0.0 : a * p0 * std::pow(b, p0 - 1.0);
  }
  return 0.0;
}

template <typename T>
void unary_typed(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  const TensorIterator it("unary", {out, x});
  T* o = out.data<T>();
  const T* in = x.data<T>();
  it.for_each_range(0, it.numel(), [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    for (std::int64_t i = 0; i < n; ++i)
      o[off[0] + i * st[0]] = static_cast<T>(apply(op, static_cast<double>(in[off[1] + i * st[1]]), p0, p1));
  });
}

template <typename T>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  const TensorIterator it("binary", {out, a, b});
  T* o = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  it.for_each_range(0, it.numel(), [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    for (std::int64_t i = 0; i < n; ++i) {
      const double va = static_cast<double>(pa[off[1] + i * st[1]]);
      const double vb = static_cast<double>(pb[off[2] + i * st[2]]);
      o[off[0] + i * st[0]] = static_cast<T>(apply(op, va, vb, p0, p1));
    }
  });
}

template <typename C, typename T>
void where_typed(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const TensorIterator it("where", {out, cond, a, b});
  T* o = out.data<T>();
  const C* pc = cond.data<C>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  it.for_each_range(0, it.numel(), [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    for (std::int64_t i = 0; i < n; ++i)
      o[off[0] + i * st[0]] = pc[off[1] + i * st[1]] != C(0) ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
  });
}

template <typename M, typename T>
void masked_fill_typed(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  const TensorIterator it("masked_fill", {out, x, mask});
  T* o = out.data<T>();
  const T* px = x.data<T>();
  const M* pm = mask.data<M>();
  const T v = static_cast<T>(value);
  it.for_each_range(0, it.numel(), [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    for (std::int64_t i = 0; i < n; ++i)
      o[off[0] + i * st[0]] = pm[off[2] + i * st[2]] != M(0) ? v : px[off[1] + i * st[1]];
  });
}

}  // namespace

void unary(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  DEFINE_DISPATCH_ALL(x.dtype(), op_name(op), [&] { unary_typed<scalar_t>(x, out, op, p0, p1); });
}

void binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  DEFINE_DISPATCH_ALL(a.dtype(), op_name(op), [&] { binary_typed<scalar_t>(a, b, out, op, p0, p1); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  DEFINE_DISPATCH_ALL(cond.dtype(), "where", [&] {
    using C = scalar_t;
    DEFINE_DISPATCH_ALL(a.dtype(), "where", [&] { where_typed<C, scalar_t>(cond, a, b, out); });
  });
}

void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  DEFINE_DISPATCH_ALL(mask.dtype(), "masked_fill", [&] {
    using M = scalar_t;
    DEFINE_DISPATCH_ALL(x.dtype(), "masked_fill", [&] { masked_fill_typed<M, scalar_t>(x, mask, out, value); });
  });
}

}  // namespace define::kernels::ref
