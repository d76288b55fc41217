// Fast CPU elementwise kernels. Each op is a small lambda over the element type T, run by one
// of two loop templates (unary_loop, binary_loop). Those loops special-case the shapes that
// dominate training: every operand stride 1 (the flat contiguous case, which the iterator's
// dim coalescing produces for any same-shape contiguous operands) and one operand broadcast with
// stride 0 (bias rows, scalars); the compiler vectorises both. Large iterations are split into
// equal element ranges, one per OpenMP thread, so results never depend on the thread count.
//
// float32 sigmoid, Swish (SiLU) and the Swish gradient use row_math's polynomial exp on whole
// vectors: libm's expf is a scalar call per element, and it was 8% of a DeLighT training step,
// whose every DExTra layer and FFN uses Swish. An op written as a generic lambda that also accepts
// a row_math::FloatVec gets that vector loop on contiguous operands; its scalar form (the tail,
// strided operands) does the same operations lane by lane, so each element's bits do not depend
// on where a thread's range starts. float64, the checking dtype, keeps std::exp.
#include "kernels/cpu/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/row_math.h"
#include "kernels/tensor_iterator.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;

using row_math::FloatVec;
using row_math::kVecLanes;
using row_math::load_vec;
using row_math::store_vec;

// Whether op has a vector form run on kVecLanes floats at a time (see the file comment).
template <typename T, typename Op, typename... Args>
constexpr bool vectorised_op() {
  if constexpr (std::is_same_v<T, float>) return std::is_invocable_v<Op, Args...>;
  return false;
}

template <typename F>
void parallel_ranges(const TensorIterator& it, const F& f) {
  const std::int64_t n = it.numel();
#pragma omp parallel if (n > kParallelGrain)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    it.for_each_range(n * t / nt, n * (t + 1) / nt, f);
  }
}

template <typename O, typename X, typename Op>
void unary_loop(const TensorIterator& it, O* out, const X* x, Op op) {
  parallel_ranges(it, [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    O* po = out + off[0];
    const X* px = x + off[1];
    if (st[0] == 1 && st[1] == 1) {
      std::int64_t i = 0;
      if constexpr (std::is_same_v<O, X> && vectorised_op<X, Op, FloatVec>())
        for (; i + kVecLanes <= n; i += kVecLanes) store_vec(po + i, op(load_vec(px + i)));
      for (; i < n; ++i) po[i] = op(px[i]);
    } else {
      const std::int64_t so = st[0], sx = st[1];
      for (std::int64_t i = 0; i < n; ++i) po[i * so] = op(px[i * sx]);
    }
  });
}

template <typename T, typename Op>
void binary_loop(const TensorIterator& it, T* out, const T* a, const T* b, Op op) {
  parallel_ranges(it, [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    T* po = out + off[0];
    const T* pa = a + off[1];
    const T* pb = b + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      std::int64_t i = 0;
      if constexpr (vectorised_op<T, Op, FloatVec, FloatVec>())
        for (; i + kVecLanes <= n; i += kVecLanes) store_vec(po + i, op(load_vec(pa + i), load_vec(pb + i)));
      for (; i < n; ++i) po[i] = op(pa[i], pb[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const T vb = *pb;
      for (std::int64_t i = 0; i < n; ++i) po[i] = op(pa[i], vb);
    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
      const T va = *pa;
      for (std::int64_t i = 0; i < n; ++i) po[i] = op(va, pb[i]);
    } else {
      const std::int64_t so = st[0], sa = st[1], sb = st[2];
      for (std::int64_t i = 0; i < n; ++i) po[i * so] = op(pa[i * sa], pb[i * sb]);
    }
  });
}

// 1 / (1 + exp(-x)). float32 (and its vectors) through row_math::exp_fast; exp_fast stops at exp(88)
// where expf overflows, so below x = -88 the result is set to 0, as 1 / (1 + inf) gives.
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline float sigmoid(float x) {
  const float s = 1.0f / (1.0f + row_math::exp_fast(-x));
  return x < -row_math::kExpHigh ? 0.0f : s;
}
inline FloatVec sigmoid(FloatVec x) {
  const FloatVec s = 1.0f / (1.0f + row_math::exp_fast(-x));
  return x < row_math::splat_vec(-row_math::kExpHigh) ? row_math::splat_vec(0.0f) : s;
}
template <typename T> T normal_cdf(T x) { return T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440))); }
template <typename T> T normal_pdf(T x) { return T(0.39894228040143267794) * std::exp(T(-0.5) * x * x); }

// Comparisons against a double scalar are done in double, as the reference does: converting
// the element is exact, converting the scalar to T might not be.
template <typename T>
void compare_scalar(const TensorIterator& it, T* o, const T* x, UnaryOp op, double s) {
  auto run = [&](auto pred) { unary_loop(it, o, x, [=](T v) { return pred(static_cast<double>(v)) ? T(1) : T(0); }); };
  switch (op) {
    case UnaryOp::EqScalar: return run([=](double v) { return v == s; });
    case UnaryOp::NeScalar: return run([=](double v) { return v != s; });
    case UnaryOp::LtScalar: return run([=](double v) { return v < s; });
    case UnaryOp::LeScalar: return run([=](double v) { return v <= s; });
    case UnaryOp::GtScalar: return run([=](double v) { return v > s; });
    case UnaryOp::GeScalar: return run([=](double v) { return v >= s; });
    default: break;
  }
}

template <typename T>
void unary_math(const TensorIterator& it, T* o, const T* x, UnaryOp op, double p0, double p1) {
  const T s0 = static_cast<T>(p0), s1 = static_cast<T>(p1);
  auto run = [&](auto f) { unary_loop(it, o, x, f); };
  switch (op) {
    case UnaryOp::Neg: return run([](T v) { return -v; });
    case UnaryOp::Exp: return run([](T v) { return std::exp(v); });
    case UnaryOp::Log: return run([](T v) { return std::log(v); });
    case UnaryOp::Sqrt: return run([](T v) { return std::sqrt(v); });
    case UnaryOp::Abs: return run([](T v) { return std::abs(v); });
    case UnaryOp::Tanh: return run([](T v) { return std::tanh(v); });
    case UnaryOp::Sigmoid: return run([](auto v) { return sigmoid(v); });
    case UnaryOp::Relu: return run([](T v) { return v < T(0) ? T(0) : v; });
    case UnaryOp::Gelu: return run([](T v) { return v * normal_cdf(v); });
    case UnaryOp::Silu: return run([](auto v) { return v * sigmoid(v); });
    case UnaryOp::AddScalar: return run([=](T v) { return v + s0; });
    case UnaryOp::MulScalar: return run([=](T v) { return v * s0; });
    case UnaryOp::RSubScalar: return run([=](T v) { return s0 - v; });
    case UnaryOp::RDivScalar: return run([=](T v) { return s0 / v; });
    case UnaryOp::PowScalar:
      if (p0 == 2.0) return run([](T v) { return v * v; });
      if (p0 == 1.0) return run([](T v) { return v; });
      if (p0 == 0.5) return run([](T v) { return std::sqrt(v); });
      return run([=](T v) { return std::pow(v, s0); });
    case UnaryOp::Clamp: return run([=](T v) { return std::min(std::max(v, s0), s1); });
    default: break;
  }
}

template <typename T>
void unary_typed(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  const TensorIterator it("unary", {out, x});
  T* o = out.data<T>();
  const T* in = x.data<T>();
  if (is_comparison(op)) return compare_scalar(it, o, in, op, p0);
  if constexpr (std::is_floating_point_v<T>) unary_math(it, o, in, op, p0, p1);
}

template <typename T>
void compare_binary(const TensorIterator& it, T* o, const T* a, const T* b, BinaryOp op) {
  auto run = [&](auto pred) { binary_loop(it, o, a, b, [=](T x, T y) { return pred(x, y) ? T(1) : T(0); }); };
  switch (op) {
    case BinaryOp::Eq: return run([](T x, T y) { return x == y; });
    case BinaryOp::Ne: return run([](T x, T y) { return x != y; });
    case BinaryOp::Lt: return run([](T x, T y) { return x < y; });
    case BinaryOp::Le: return run([](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return run([](T x, T y) { return x > y; });
    case BinaryOp::Ge: return run([](T x, T y) { return x >= y; });
    default: break;
  }
}

template <typename T>
void binary_math(const TensorIterator& it, T* o, const T* a, const T* b, BinaryOp op, double p0, double p1) {
  const T s0 = static_cast<T>(p0), s1 = static_cast<T>(p1);
  auto run = [&](auto f) { binary_loop(it, o, a, b, f); };
  switch (op) {
    case BinaryOp::Add: return run([](T x, T y) { return x + y; });
    case BinaryOp::Sub: return run([](T x, T y) { return x - y; });
    case BinaryOp::Mul: return run([](T x, T y) { return x * y; });
    case BinaryOp::Div: return run([](T x, T y) { return x / y; });
    case BinaryOp::Maximum: return run([](T x, T y) { return (x > y || x != x) ? x : y; });
    case BinaryOp::Minimum: return run([](T x, T y) { return (x < y || x != x) ? x : y; });
    case BinaryOp::Pow: return run([](T x, T y) { return std::pow(x, y); });
    case BinaryOp::AddScaled:
      if (p0 == 1.0) return run([](T x, T y) { return x + y; });
      return run([=](T x, T y) { return x + s0 * y; });
    case BinaryOp::MaxWeight: return run([](T x, T y) { return x > y ? T(1) : (x == y ? T(0.5) : T(0)); });
    case BinaryOp::ReluBackward: return run([](T g, T x) { return x > T(0) ? g : T(0); });
    case BinaryOp::GeluBackward: return run([](T g, T x) { return g * (normal_cdf(x) + x * normal_pdf(x)); });
    case BinaryOp::SiluBackward:
      return run([](auto g, auto x) {
        const auto s = sigmoid(x);
        return g * s * (1.0f + x * (1.0f - s));
      });
    case BinaryOp::SigmoidBackward: return run([](T g, T y) { return g * y * (T(1) - y); });
    case BinaryOp::TanhBackward: return run([](T g, T y) { return g * (T(1) - y * y); });
    case BinaryOp::SqrtBackward: return run([](T g, T y) { return g * T(0.5) / y; });
    case BinaryOp::AbsBackward: return run([](T g, T x) { return x > T(0) ? g : (x < T(0) ? -g : T(0)); });
    case BinaryOp::ClampBackward: return run([=](T g, T x) { return (x >= s0 && x <= s1) ? g : T(0); });
    case BinaryOp::PowScalarBackward:
      if (p0 == 0.0) return run([](T, T) { return T(0); });
      if (p0 == 2.0) return run([](T g, T x) { return g * T(2) * x; });
      return run([=](T g, T x) { return g * s0 * std::pow(x, static_cast<T>(p0 - 1.0)); });
    default: break;
  }
}

template <typename T>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  const TensorIterator it("binary", {out, a, b});
  T* o = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  if (is_comparison(op)) return compare_binary(it, o, pa, pb, op);
  if constexpr (std::is_floating_point_v<T>) binary_math(it, o, pa, pb, op, p0, p1);
}

template <typename C, typename T>
void where_typed(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const TensorIterator it("where", {out, cond, a, b});
  T* o = out.data<T>();
  const C* pc = cond.data<C>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  parallel_ranges(it, [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    T* po = o + off[0];
    const C* c = pc + off[1];
    const T* x = pa + off[2];
    const T* y = pb + off[3];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
      for (std::int64_t i = 0; i < n; ++i) po[i] = c[i] != C(0) ? x[i] : y[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) po[i * st[0]] = c[i * st[1]] != C(0) ? x[i * st[2]] : y[i * st[3]];
    }
  });
}

template <typename M, typename T>
void masked_fill_typed(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  const TensorIterator it("masked_fill", {out, x, mask});
  T* o = out.data<T>();
  const T* px = x.data<T>();
  const M* pm = mask.data<M>();
  const T v = static_cast<T>(value);
  parallel_ranges(it, [&](const std::int64_t* off, std::int64_t n, const std::int64_t* st) {
    T* po = o + off[0];
    const T* xi = px + off[1];
    const M* m = pm + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (std::int64_t i = 0; i < n; ++i) po[i] = m[i] != M(0) ? v : xi[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) po[i * st[0]] = m[i * st[2]] != M(0) ? v : xi[i * st[1]];
    }
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

}  // namespace define::kernels::cpu
