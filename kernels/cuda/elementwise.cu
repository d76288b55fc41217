// CUDA elementwise family: unary and binary maps (math, comparisons, the backward formulas of the
// activation functions), where and masked_fill. Entry points and checks: kernels/elementwise.cpp;
// reference: kernels/ref/elementwise.cpp; the formulas and the order of their float operations
// follow the CPU path (kernels/cpu/elementwise.cpp). Tests: every op-harness case of
// tests/ops/elementwise_test.cpp in mode emu, plus tests/cuda/elementwise_kernels_test.cpp.
//
// Each op is a small functor on the compute type (float for 16-bit tensors, which the kernels read
// and write through float16.cuh); four grid-stride kernel templates (one, two or three inputs, and
// masked_fill) apply it to every element. The host side coalesces dims with the TensorIterator,
// so broadcasting and arbitrary strides reach the kernel as an OffsetCalc, and when every operand
// is flat the kernel indexes with the linear position directly. Index math is 32-bit wherever the
// tensors allow it (kIndex32, common.cuh's index32_fits), 64-bit otherwise. Every element is read and
// written by the same thread, so out may alias an input (in-place ops): no pointer here is
// __restrict__.
//
// Flat unary and binary maps whose operands all start on a 16-byte boundary move 16-byte packs
// (8 float16 / bfloat16 or 4 float32 elements; float64 goes element by element) per load and
// store: one 128-bit access per thread and step instead of 8 narrow ones for the 16-bit formats,
// whose 2-byte accesses would otherwise use an eighth of each load instruction's width. The elements past the last
// whole pack go through the same kernel one by one. The results are the per-element kernel's.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/float16.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Device math (dev_exp, dev_log, ...): kernels/cuda/device_math.cuh.

template <typename T>
__device__ __forceinline__ T sigmoid(T x) {
  return T(1) / (T(1) + dev_exp(-x));
}
template <typename T>
__device__ __forceinline__ T normal_cdf(T x) {
  return T(0.5) * (T(1) + dev_erf(x * T(0.70710678118654752440)));
}
template <typename T>
__device__ __forceinline__ T normal_pdf(T x) {
  return T(0.39894228040143267794) * dev_exp(T(-0.5) * x * x);
}

// ---- Comparisons ----
// The comparison is a kernel argument, not a template parameter: one uniform branch an element is
// free in a memory-bound map, and six comparisons as six kernels each (times six dtypes and three
// kernel forms) were a quarter of this file's kernels and of its compile time.
template <typename T>
__device__ __forceinline__ bool compare(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Eq:
      return a == b;
    case BinaryOp::Ne:
      return a != b;
    case BinaryOp::Lt:
      return a < b;
    case BinaryOp::Le:
      return a <= b;
    case BinaryOp::Gt:
      return a > b;
    default:
      return a >= b;  // BinaryOp::Ge: the host side passes comparisons only
  }
}

// Element against a double scalar, compared in double as the reference does: converting the
// element is exact for float types, converting the scalar to T might not be (x < 2.5 on ints).
struct CompareScalar {
  BinaryOp op;
  double s;
  template <typename T>
  __device__ T operator()(T v) const {
    return compare(op, static_cast<double>(v), s) ? T(1) : T(0);
  }
};

struct CompareElements {
  BinaryOp op;
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return compare(op, a, b) ? T(1) : T(0);
  }
};

// ---- Unary math (float types) ----
struct Negate { template <typename T> __device__ T operator()(T v) const { return -v; } };
struct Exp { template <typename T> __device__ T operator()(T v) const { return dev_exp(v); } };
struct Log { template <typename T> __device__ T operator()(T v) const { return dev_log(v); } };
struct Sqrt { template <typename T> __device__ T operator()(T v) const { return dev_sqrt(v); } };
struct Abs { template <typename T> __device__ T operator()(T v) const { return dev_abs(v); } };
struct Tanh { template <typename T> __device__ T operator()(T v) const { return dev_tanh(v); } };
struct Sigmoid { template <typename T> __device__ T operator()(T v) const { return sigmoid(v); } };
// NaN passes through relu, as in the reference (x < 0 ? 0 : x).
struct Relu { template <typename T> __device__ T operator()(T v) const { return v < T(0) ? T(0) : v; } };
// The exact (erf) gelu, not the tanh approximation.
struct Gelu { template <typename T> __device__ T operator()(T v) const { return v * normal_cdf(v); } };
struct Silu { template <typename T> __device__ T operator()(T v) const { return v * sigmoid(v); } };
struct Square { template <typename T> __device__ T operator()(T v) const { return v * v; } };
struct Identity { template <typename T> __device__ T operator()(T v) const { return v; } };

template <typename T> struct AddScalar { T s; __device__ T operator()(T v) const { return v + s; } };
template <typename T> struct MulScalar { T s; __device__ T operator()(T v) const { return v * s; } };
template <typename T> struct ScalarMinus { T s; __device__ T operator()(T v) const { return s - v; } };
template <typename T> struct ScalarOver { T s; __device__ T operator()(T v) const { return s / v; } };
template <typename T> struct PowScalar { T p; __device__ T operator()(T v) const { return dev_pow(v, p); } };
// std::min(std::max(v, lo), hi) spelled out: device code may call std::min/max only with
// --expt-relaxed-constexpr. NaN passes through, as in the reference.
template <typename T>
struct Clamp {
  T lo, hi;
  __device__ T operator()(T v) const {
    const T above_lo = v < lo ? lo : v;
    return hi < above_lo ? hi : above_lo;
  }
};

// ---- Binary math (float types); for the backward formulas a is the upstream gradient g ----
struct Add { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct Sub { template <typename T> __device__ T operator()(T a, T b) const { return a - b; } };
struct Mul { template <typename T> __device__ T operator()(T a, T b) const { return a * b; } };
struct Div { template <typename T> __device__ T operator()(T a, T b) const { return a / b; } };
// A NaN in a wins; a NaN in b loses only to a NaN in a (both compare false otherwise).
struct Maximum { template <typename T> __device__ T operator()(T a, T b) const { return (a > b || a != a) ? a : b; } };
struct Minimum { template <typename T> __device__ T operator()(T a, T b) const { return (a < b || a != a) ? a : b; } };
struct Pow { template <typename T> __device__ T operator()(T a, T b) const { return dev_pow(a, b); } };
template <typename T> struct AddScaled { T alpha; __device__ T operator()(T a, T b) const { return a + alpha * b; } };
struct MaxWeight {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? T(1) : (a == b ? T(0.5) : T(0)); }
};
struct ReluBackward { template <typename T> __device__ T operator()(T g, T x) const { return x > T(0) ? g : T(0); } };
struct GeluBackward {
  template <typename T>
  __device__ T operator()(T g, T x) const { return g * (normal_cdf(x) + x * normal_pdf(x)); }
};
struct SiluBackward {
  template <typename T>
  __device__ T operator()(T g, T x) const {
    const T s = sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
struct SigmoidBackward { template <typename T> __device__ T operator()(T g, T y) const { return g * y * (T(1) - y); } };
struct TanhBackward { template <typename T> __device__ T operator()(T g, T y) const { return g * (T(1) - y * y); } };
struct SqrtBackward { template <typename T> __device__ T operator()(T g, T y) const { return g * T(0.5) / y; } };
struct AbsBackward {
  template <typename T>
  __device__ T operator()(T g, T x) const { return x > T(0) ? g : (x < T(0) ? -g : T(0)); }
};
template <typename T>
struct ClampBackward {
  T lo, hi;
  __device__ T operator()(T g, T x) const { return (x >= lo && x <= hi) ? g : T(0); }
};
// d/dx x^p = p x^(p-1); p == 0 and p == 2 are special-cased on the host as on the CPU path (a
// constant has gradient 0 even at x == 0, where the formula gives 0 * 0^-1 = NaN).
struct ZeroGradient { template <typename T> __device__ T operator()(T, T) const { return T(0); } };
struct SquareBackward { template <typename T> __device__ T operator()(T g, T x) const { return g * T(2) * x; } };
template <typename T>
struct PowScalarBackward {
  T p, p_minus_1;
  __device__ T operator()(T g, T x) const { return g * p * dev_pow(x, p_minus_1); }
};

// ---- Kernels ----

// for_each_element (common.cuh) walks the elements.

template <bool kIndex32, typename T, typename F>
__global__ void __launch_bounds__(kBlockSize)
    unary_kernel(T* out, const T* x, std::int64_t n, bool flat, OffsetCalc<2> calc, F f) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  for_each_element<kIndex32, 2>(n, flat, calc, [&](const auto& off) {
    out[off[0]] = store_value<T>(f(load_value(x[off[1]])));
  });
}

template <bool kIndex32, typename T, typename F>
__global__ void __launch_bounds__(kBlockSize)
    binary_kernel(T* out, const T* a, const T* b, std::int64_t n, bool flat, OffsetCalc<3> calc, F f) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  for_each_element<kIndex32, 3>(n, flat, calc, [&](const auto& off) {
    out[off[0]] = store_value<T>(f(load_value(a[off[1]]), load_value(b[off[2]])));
  });
}

// where and masked_fill move values without reading them: T is an unsigned integer of the
// values' size (ValueBits), so float32 and int32 (and float64 and int64, float16 and bfloat16) share
// one kernel.
template <bool kIndex32, typename C, typename T>
__global__ void __launch_bounds__(kBlockSize)
    where_kernel(T* out, const C* cond, const T* a, const T* b, std::int64_t n, bool flat, OffsetCalc<4> calc) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  for_each_element<kIndex32, 4>(n, flat, calc, [&](const auto& off) {
    out[off[0]] = load_value(cond[off[1]]) != compute_t<C>(0) ? a[off[2]] : b[off[3]];
  });
}

// masked_fill's value as a kernel argument: 32 or 64 bits (a 16-bit kernel argument makes sm_61's
// ptxas spill in the 64-bit index form).
template <typename T>
using FillArg = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

template <bool kIndex32, typename M, typename T>
__global__ void __launch_bounds__(kBlockSize) masked_fill_kernel(T* out, const T* x, const M* mask, FillArg<T> value,
                                                                 std::int64_t n, bool flat, OffsetCalc<3> calc) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  for_each_element<kIndex32, 3>(n, flat, calc, [&](const auto& off) {
    out[off[0]] = static_cast<T>(load_value(mask[off[2]]) != compute_t<M>(0) ? value : FillArg<T>(x[off[1]]));
  });
}

template <typename T, typename F>
__global__ void __launch_bounds__(kBlockSize) unary_packed_kernel(T* out, const T* x, std::int64_t n, F f) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  constexpr int kSize = Vec16<T>::kSize;
  const std::int64_t packs = n / kSize, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t p = first; p < packs; p += stride) {
    const Vec16<T> in = reinterpret_cast<const Vec16<T>*>(x)[p];
    Vec16<T> r;
#pragma unroll
    for (int k = 0; k < kSize; ++k) r.v[k] = store_value<T>(f(load_value(in.v[k])));
    reinterpret_cast<Vec16<T>*>(out)[p] = r;
  }
  for (std::int64_t i = packs * kSize + first; i < n; i += stride) out[i] = store_value<T>(f(load_value(x[i])));
}

template <typename T, typename F>
__global__ void __launch_bounds__(kBlockSize)
    binary_packed_kernel(T* out, const T* a, const T* b, std::int64_t n, F f) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  constexpr int kSize = Vec16<T>::kSize;
  const std::int64_t packs = n / kSize, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t p = first; p < packs; p += stride) {
    const Vec16<T> pa = reinterpret_cast<const Vec16<T>*>(a)[p];
    const Vec16<T> pb = reinterpret_cast<const Vec16<T>*>(b)[p];
    Vec16<T> r;
#pragma unroll
    for (int k = 0; k < kSize; ++k) r.v[k] = store_value<T>(f(load_value(pa.v[k]), load_value(pb.v[k])));
    reinterpret_cast<Vec16<T>*>(out)[p] = r;
  }
  for (std::int64_t i = packs * kSize + first; i < n; i += stride)
    out[i] = store_value<T>(f(load_value(a[i]), load_value(b[i])));
}

// ---- Host side ----

// The types whose flat maps move 16-byte packs: the 16-bit formats (8 values a load instead of 8
// 2-byte loads) and float32. float64 gains little from pairs, and the math library's double
// routines, unrolled over a pack, spill registers (sm_90).
template <typename T>
constexpr bool kPacked = sizeof(T) <= 4;

// Whether a flat map may run on packs: every operand on a 16-byte boundary.
bool pack_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

template <typename T, typename F>
void launch_unary(const char* name, const Tensor& x, const Tensor& out, F f) {
  const TensorIterator it(name, {out, x});
  if constexpr (kPacked<T>) {
    if (all_flat(it) && pack_aligned({out.data<T>(), x.data<T>()})) {
      launch_checked(name, unary_packed_kernel<T, F>, grid_for(ceil_div(it.numel(), Vec16<T>::kSize)), kBlockSize, 0,
                     out.data<T>(), x.data<T>(), it.numel(), f);
      return;
    }
  }
  dispatch_index_width(it, [&]<bool kIndex32>() {
    launch_checked(name, unary_kernel<kIndex32, T, F>, grid_for(it.numel()), kBlockSize, 0, out.data<T>(),
                   x.data<T>(), it.numel(), all_flat(it), make_offset_calc<2>(name, it), f);
  });
}

template <typename T, typename F>
void launch_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const TensorIterator it(name, {out, a, b});
  if constexpr (kPacked<T>) {
    if (all_flat(it) && pack_aligned({out.data<T>(), a.data<T>(), b.data<T>()})) {
      launch_checked(name, binary_packed_kernel<T, F>, grid_for(ceil_div(it.numel(), Vec16<T>::kSize)), kBlockSize, 0,
                     out.data<T>(), a.data<T>(), b.data<T>(), it.numel(), f);
      return;
    }
  }
  dispatch_index_width(it, [&]<bool kIndex32>() {
    launch_checked(name, binary_kernel<kIndex32, T, F>, grid_for(it.numel()), kBlockSize, 0, out.data<T>(),
                   a.data<T>(), b.data<T>(), it.numel(), all_flat(it), make_offset_calc<3>(name, it), f);
  });
}

// The binary comparison that a scalar comparison is (x op s).
BinaryOp scalar_comparison(UnaryOp op) {
  switch (op) {
    case UnaryOp::EqScalar: return BinaryOp::Eq;
    case UnaryOp::NeScalar: return BinaryOp::Ne;
    case UnaryOp::LtScalar: return BinaryOp::Lt;
    case UnaryOp::LeScalar: return BinaryOp::Le;
    case UnaryOp::GtScalar: return BinaryOp::Gt;
    case UnaryOp::GeScalar: return BinaryOp::Ge;
    default: fail(op_name(op), "internal: not a comparison");
  }
}

template <typename T>
void compare_scalar(const Tensor& x, const Tensor& out, UnaryOp op, double s) {
  launch_unary<T>(op_name(op), x, out, CompareScalar{scalar_comparison(op), s});
}

template <typename T>
void unary_math(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  using C = compute_t<T>;
  const char* name = op_name(op);
  const C s0 = static_cast<C>(p0), s1 = static_cast<C>(p1);
  auto run = [&](auto f) { launch_unary<T>(name, x, out, f); };
  switch (op) {
    case UnaryOp::Neg: return run(Negate{});
    case UnaryOp::Exp: return run(Exp{});
    case UnaryOp::Log: return run(Log{});
    case UnaryOp::Sqrt: return run(Sqrt{});
    case UnaryOp::Abs: return run(Abs{});
    case UnaryOp::Tanh: return run(Tanh{});
    case UnaryOp::Sigmoid: return run(Sigmoid{});
    case UnaryOp::Relu: return run(Relu{});
    case UnaryOp::Gelu: return run(Gelu{});
    case UnaryOp::Silu: return run(Silu{});
    case UnaryOp::AddScalar: return run(AddScalar<C>{s0});
    case UnaryOp::MulScalar: return run(MulScalar<C>{s0});
    case UnaryOp::RSubScalar: return run(ScalarMinus<C>{s0});
    case UnaryOp::RDivScalar: return run(ScalarOver<C>{s0});
    case UnaryOp::PowScalar:
      // The CPU path's special cases: exact squares and square roots, and no pow call at all.
      if (p0 == 2.0) return run(Square{});
      if (p0 == 1.0) return run(Identity{});
      if (p0 == 0.5) return run(Sqrt{});
      return run(PowScalar<C>{s0});
    case UnaryOp::Clamp: return run(Clamp<C>{s0, s1});
    default: fail(name, "internal: unhandled unary op");
  }
}

template <typename T>
void compare_binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op) {
  if (!is_comparison(op)) fail(op_name(op), "internal: not a comparison");
  launch_binary<T>(op_name(op), a, b, out, CompareElements{op});
}

template <typename T>
void binary_math(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  using C = compute_t<T>;
  const char* name = op_name(op);
  const C s0 = static_cast<C>(p0), s1 = static_cast<C>(p1);
  auto run = [&](auto f) { launch_binary<T>(name, a, b, out, f); };
  switch (op) {
    case BinaryOp::Add: return run(Add{});
    case BinaryOp::Sub: return run(Sub{});
    case BinaryOp::Mul: return run(Mul{});
    case BinaryOp::Div: return run(Div{});
    case BinaryOp::Maximum: return run(Maximum{});
    case BinaryOp::Minimum: return run(Minimum{});
    case BinaryOp::Pow: return run(Pow{});
    case BinaryOp::AddScaled:
      if (p0 == 1.0) return run(Add{});
      return run(AddScaled<C>{s0});
    case BinaryOp::MaxWeight: return run(MaxWeight{});
    case BinaryOp::ReluBackward: return run(ReluBackward{});
    case BinaryOp::GeluBackward: return run(GeluBackward{});
    case BinaryOp::SiluBackward: return run(SiluBackward{});
    case BinaryOp::SigmoidBackward: return run(SigmoidBackward{});
    case BinaryOp::TanhBackward: return run(TanhBackward{});
    case BinaryOp::SqrtBackward: return run(SqrtBackward{});
    case BinaryOp::AbsBackward: return run(AbsBackward{});
    case BinaryOp::ClampBackward: return run(ClampBackward<C>{s0, s1});
    case BinaryOp::PowScalarBackward:
      if (p0 == 0.0) return run(ZeroGradient{});
      if (p0 == 2.0) return run(SquareBackward{});
      return run(PowScalarBackward<C>{s0, static_cast<C>(p0 - 1.0)});
    default: fail(name, "internal: unhandled binary op");
  }
}

}  // namespace

// Comparisons run on every dtype; everything else is float-only (the entry point has checked).
void unary(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  if (is_comparison(op)) {
    DEFINE_DISPATCH_ALL(x.dtype(), op_name(op), [&] { compare_scalar<scalar_t>(x, out, op, p0); });
  } else {
    DEFINE_DISPATCH_FLOATING(x.dtype(), op_name(op), [&] { unary_math<scalar_t>(x, out, op, p0, p1); });
  }
}

void binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  if (is_comparison(op)) {
    DEFINE_DISPATCH_ALL(a.dtype(), op_name(op), [&] { compare_binary<scalar_t>(a, b, out, op); });
  } else {
    DEFINE_DISPATCH_FLOATING(a.dtype(), op_name(op), [&] { binary_math<scalar_t>(a, b, out, op, p0, p1); });
  }
}

// The unsigned integer of a value's size: what where and masked_fill move.
template <std::size_t kBytes>
using ValueBits =
    std::conditional_t<kBytes == 2, std::uint16_t, std::conditional_t<kBytes == 4, std::uint32_t, std::uint64_t>>;

// Runs f.template operator()<Bits>() with the unsigned integer of dtype's size.
template <typename F>
void dispatch_value_bits(DType dtype, const char* name, F&& f) {
  switch (dtype_size(dtype)) {
    case 2:
      return f.template operator()<ValueBits<2>>();
    case 4:
      return f.template operator()<ValueBits<4>>();
    case 8:
      return f.template operator()<ValueBits<8>>();
    default:
      fail(name, "dtype {} is not supported", dtype_name(dtype));
  }
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const TensorIterator it("where", {out, cond, a, b});
  const auto calc = make_offset_calc<4>("where", it);
  DEFINE_DISPATCH_ALL(cond.dtype(), "where", [&] {
    using C = scalar_t;
    dispatch_value_bits(a.dtype(), "where", [&]<typename T>() {
      dispatch_index_width(it, [&]<bool kIndex32>() {
        launch_checked("where", where_kernel<kIndex32, C, T>, grid_for(it.numel()), kBlockSize, 0,
                       static_cast<T*>(out.raw_data()), cond.data<C>(), static_cast<const T*>(a.raw_data()),
                       static_cast<const T*>(b.raw_data()), it.numel(), all_flat(it), calc);
      });
    });
  });
}

// masked_fill's value as the kernel takes it: the bits of the double rounded once to x's dtype (as
// a cast rounds), widened to the kernel argument's 32 or 64 bits.
template <typename T>
std::uint64_t fill_bits(double v) {
  const T t = static_cast<T>(v);
  ValueBits<sizeof(T)> bits;
  std::memcpy(&bits, &t, sizeof(T));
  return bits;
}

void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  const TensorIterator it("masked_fill", {out, x, mask});
  const auto calc = make_offset_calc<3>("masked_fill", it);
  std::uint64_t bits = 0;
  DEFINE_DISPATCH_ALL(x.dtype(), "masked_fill", [&] { bits = fill_bits<scalar_t>(value); });
  DEFINE_DISPATCH_ALL(mask.dtype(), "masked_fill", [&] {
    using M = scalar_t;
    dispatch_value_bits(x.dtype(), "masked_fill", [&]<typename T>() {
      dispatch_index_width(it, [&]<bool kIndex32>() {
        launch_checked("masked_fill", masked_fill_kernel<kIndex32, M, T>, grid_for(it.numel()), kBlockSize, 0,
                       static_cast<T*>(out.raw_data()), static_cast<const T*>(x.raw_data()), mask.data<M>(),
                       static_cast<FillArg<T>>(bits), it.numel(), all_flat(it), calc);
      });
    });
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
