// Row math shared by the fast CPU softmax-style kernels (softmax.cpp, attention.cpp,
// adaptive_softmax.cpp): a float32 exp that the compiler vectorises, and row max / sum / dot /
// sum-of-exp reductions.
//
// Why these shapes: without -ffast-math the compiler may not reassociate a floating-point sum, so
// a plain `s += x[j]` loop stays scalar. The reductions here keep kLanes independent partial
// results (lane l sees elements l, l + kLanes, ...), each of them an ordinary sequential sum, which
// the compiler can map onto one vector register with no change to any result bit. std::exp is a
// scalar libm call without -ffast-math and would dominate a vocabulary-wide row, so float32 uses
// the polynomial exp_fast below; float64 is the checking dtype and keeps std::exp.
//
// float32 runs the lanes as explicit vectors (GCC / clang vector extensions: two of 8 floats where the
// target has AVX, four of 4 otherwise), each lane doing exactly the scalar code's operations, so
// results are the same bits as the scalar loops'.
// Why explicit: GCC 12 vectorises the scalar 16-lane loops for AVX-512 targets but leaves them
// scalar for AVX2 ones, which made every vocabulary-wide softmax several times slower there.
// float64 keeps the scalar loops.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace define::kernels::cpu::row_math {
// Internal linkage, like the per-file copies these helpers replace: GCC always inlines a local
// function that a file calls once, so each kernel file keeps the inlining (and thus the
// vectorisation and the exact instruction sequence) it had with its own copy. With external
// linkage attention.cpp's row functions lost their inlined max and exp loops.
namespace {

constexpr int kLanes = 16;  // independent accumulators per reduction (one AVX-512 vector of float)

// exp(x) for float32, accurate to a few ulp. x = n*ln2 + r with |r| <= ln2/2, exp(r) by its
// degree-7 Taylor polynomial (truncation error < 1e-8 relative on that interval), 2^n put
// straight into the exponent bits. Inputs below -87 (where the result leaves the normal range)
// give exactly 0, so masked (-inf) logits get zero probability; NaN stays NaN.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;              // few mantissa bits: n * kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440054690583e-4f;  // ln2 - kLn2Hi
constexpr float kRound = 12582912.0f;               // 1.5 * 2^23: adding it rounds to an integer
constexpr float kExpLow = -87.0f, kExpHigh = 88.0f;

// The polynomial and the exponent bits, for a float or a FloatVec (written once for both).
template <typename F, typename U>
F exp_fast_core(F xc) {
  // Rounding by kRound rather than std::floor, which would be a libm call and keep loops scalar.
  const F t = xc * kLog2e + kRound;
  const F n = t - kRound;
  const F r = (xc - n * kLn2Hi) - n * kLn2Lo;
  F p = F{} + 1.0f / 5040.0f;  // the constant in every lane
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // The low mantissa bits of t hold n (two's complement); bias it into an exponent field.
  const U ni = std::bit_cast<U>(t) - std::bit_cast<std::uint32_t>(kRound);
  const F scale = std::bit_cast<F>((ni + 127u) << 23);
  return p * scale;
}

inline float exp_fast(float x) {
  const float xc = x < kExpLow ? kExpLow : (x > kExpHigh ? kExpHigh : x);
  return x < kExpLow ? 0.0f : exp_fast_core<float, std::uint32_t>(xc);
}
inline double exp_fast(double x) { return std::exp(x); }

// kVecLanes float lanes in one value: 16 (64 bytes) where the target has AVX-512, 8 where it has
// AVX, else 4, so a vector always fits the target's registers and passing one to a function never
// changes the ABI. The lanes' operations, and so every result bit, do not depend on the width.
#if defined(__AVX512F__)
constexpr int kVecLanes = 16;
#elif defined(__AVX__)
constexpr int kVecLanes = 8;
#else
constexpr int kVecLanes = 4;
#endif
constexpr int kVecs = kLanes / kVecLanes;  // vectors per group of kLanes
using FloatVec = float __attribute__((vector_size(kVecLanes * sizeof(float))));
using UintVec = std::uint32_t __attribute__((vector_size(kVecLanes * sizeof(std::uint32_t))));

inline FloatVec load_vec(const float* p) {
  FloatVec v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
inline void store_vec(float* p, FloatVec v) { std::memcpy(p, &v, sizeof v); }
inline FloatVec splat_vec(float s) {
  FloatVec v;
  for (int l = 0; l < kVecLanes; ++l) v[l] = s;
  return v;
}
// The lanes of vectors acc[0 .. kVecs) into out[0 .. kLanes).
inline void store_lanes(float* out, const FloatVec* acc) {
  for (int v = 0; v < kVecs; ++v) store_vec(out + v * kVecLanes, acc[v]);
}

// exp_fast in each lane.
inline FloatVec exp_fast(FloatVec x) {
  const FloatVec low = splat_vec(kExpLow), high = splat_vec(kExpHigh);
  const FloatVec xc = x < low ? low : (x > high ? high : x);
  return x < low ? splat_vec(0.0f) : exp_fast_core<FloatVec, UintVec>(xc);
}

template <typename T>
T max_of(T a, T b) {
  return b > a ? b : a;  // the shape the compiler maps onto vector max instructions
}

// max_j x_j (-inf for an empty row). NaN elements are skipped: no comparison with them is true.
template <typename T>
T row_max(const T* x, std::int64_t n) {
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -std::numeric_limits<T>::infinity();
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    FloatVec a[kVecs];
    for (FloatVec& v : a) v = splat_vec(acc[0]);
    for (; j + kLanes <= n; j += kLanes)
      for (int v = 0; v < kVecs; ++v) {
        const FloatVec xv = load_vec(x + j + v * kVecLanes);
        a[v] = xv > a[v] ? xv : a[v];  // max_of(acc, x), lane by lane
      }
    store_lanes(acc, a);
  } else {
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] = max_of(acc[l], x[j + l]);
  }
  T m = -std::numeric_limits<T>::infinity();
  for (; j < n; ++j) m = max_of(m, x[j]);
  for (int l = 0; l < kLanes; ++l) m = max_of(m, acc[l]);
  return m;
}

// The order in which a row sum adds its kLanes lane partials (the first n - n % kLanes terms, in
// T) and its tail (the last n % kLanes terms, one by one) in double. The three kernel families
// were written with different orders and their results are pinned bit for bit, so each keeps its
// own; the orders differ only in the rounding of the final double additions.
enum class SumOrder {
  kLanesThenTail,  // ((lane_0 + ... + lane_15) + tail_0) + tail_1 + ...
  kTailThenLanes,  // ((tail_0 + tail_1 + ...) + lane_0) + ... + lane_15
  kTailPlusLanes,  // (tail_0 + tail_1 + ...) + (lane_0 + ... + lane_15)
};

template <typename T>
double lane_total(const T* acc) {
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// The total of a row from its lane partials acc and the tail terms tail_term(j), j in [first, n),
// added in kOrder.
template <SumOrder kOrder, typename T, typename TailTerm>
double add_tail(const T* acc, std::int64_t first, std::int64_t n, TailTerm tail_term) {
  if constexpr (kOrder == SumOrder::kLanesThenTail) {
    double s = lane_total(acc);
    for (std::int64_t j = first; j < n; ++j) s += tail_term(j);
    return s;
  } else {
    double s = 0;
    for (std::int64_t j = first; j < n; ++j) s += tail_term(j);
    if constexpr (kOrder == SumOrder::kTailPlusLanes) return s + lane_total(acc);
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    return s;
  }
}

// sum_j term_j for j < n: lane_term(j) (a T) for the elements in whole groups of kLanes,
// tail_term(j) (added in double) for the rest, combined in kOrder.
template <SumOrder kOrder, typename T, typename LaneTerm, typename TailTerm>
double lane_sum(std::int64_t n, LaneTerm lane_term, TailTerm tail_term) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += lane_term(j + l);
  return add_tail<kOrder>(acc, j, n, tail_term);
}

// lane_sum for float with the lanes as vectors: lane_term_vec(j) gives the terms of elements
// j .. j + kVecLanes - 1.
template <SumOrder kOrder, typename LaneTermVec, typename TailTerm>
double lane_sum_vec(std::int64_t n, LaneTermVec lane_term_vec, TailTerm tail_term) {
  FloatVec a[kVecs] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int v = 0; v < kVecs; ++v) a[v] += lane_term_vec(j + v * kVecLanes);
  float acc[kLanes];
  store_lanes(acc, a);
  return add_tail<kOrder>(acc, j, n, tail_term);
}

// sum_j x_j.
template <SumOrder kOrder, typename T>
double row_sum(const T* x, std::int64_t n) {
  const auto at = [x](std::int64_t j) { return x[j]; };
  if constexpr (std::is_same_v<T, float>) return lane_sum_vec<kOrder>(n, [x](std::int64_t j) { return load_vec(x + j); }, at);
  else return lane_sum<kOrder, T>(n, at, at);
}

// sum_j a_j * b_j: products in T inside the lanes, in double in the tail.
template <SumOrder kOrder, typename T>
double row_dot(const T* a, const T* b, std::int64_t n) {
  const auto tail = [a, b](std::int64_t j) { return double(a[j]) * b[j]; };
  if constexpr (std::is_same_v<T, float>)
    return lane_sum_vec<kOrder>(n, [a, b](std::int64_t j) { return load_vec(a + j) * load_vec(b + j); }, tail);
  else return lane_sum<kOrder, T>(n, [a, b](std::int64_t j) { return a[j] * b[j]; }, tail);
}

// sum_j exp(x_j - shift); also stores the exponentials in y when y is not null (y may be x itself:
// each element is read before it is written). Spelled out rather than built on lane_sum: in this
// form GCC compiles it exactly as the kernel files' own copies were compiled.
template <SumOrder kOrder, typename T>
double row_sum_exp(const T* x, T* y, std::int64_t n, T shift) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    FloatVec a[kVecs] = {};
    for (; j + kLanes <= n; j += kLanes)
      for (int v = 0; v < kVecs; ++v) {
        // Each vector is read before it is written: y may be x.
        const FloatVec e = exp_fast(load_vec(x + j + v * kVecLanes) - shift);
        if (y) store_vec(y + j + v * kVecLanes, e);
        a[v] += e;
      }
    store_lanes(acc, a);
  } else if (y) {
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const T e = exp_fast(x[j + l] - shift);
        y[j + l] = e;
        acc[l] += e;
      }
  } else {
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += exp_fast(x[j + l] - shift);
  }
  return add_tail<kOrder>(acc, j, n, [x, y, shift](std::int64_t k) {
    const T e = exp_fast(x[k] - shift);
    if (y) y[k] = e;
    return e;
  });
}

// y_j = scale * exp(x_j - shift) - sub for j < n (the cross-entropy gradient's row).
template <typename T>
void store_scaled_exp(const T* x, T* y, std::int64_t n, T shift, T scale, T sub) {
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; j + kVecLanes <= n; j += kVecLanes) store_vec(y + j, scale * exp_fast(load_vec(x + j) - shift) - sub);
  for (; j < n; ++j) y[j] = scale * exp_fast(x[j] - shift) - sub;
}

// y_j = scale * x_j - sub for j < n (the cross-entropy gradient's row from saved exponentials).
template <typename T>
void store_scaled(const T* x, T* y, std::int64_t n, T scale, T sub) {
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; j + kVecLanes <= n; j += kVecLanes) store_vec(y + j, scale * load_vec(x + j) - sub);
  for (; j < n; ++j) y[j] = scale * x[j] - sub;
}

// y_j = g_j - exp(x_j - shift) * scale for j < n (log-softmax gradients).
template <typename T>
void store_minus_scaled_exp(const T* g, const T* x, T* y, std::int64_t n, T shift, T scale) {
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; j + kVecLanes <= n; j += kVecLanes)
      store_vec(y + j, load_vec(g + j) - exp_fast(load_vec(x + j) - shift) * scale);
  for (; j < n; ++j) y[j] = g[j] - exp_fast(x[j] - shift) * scale;
}

// A row's maximum and log(sum exp(x - max)). Log-probabilities are (x - max) - log_sum, which
// keeps the low bits of large logits (x - lse would round lse at the magnitude of x).
template <typename T>
struct RowStats {
  T max;
  double log_sum;
  double lse() const { return double(max) + log_sum; }
};

template <typename T>
RowStats<T> row_stats(const T* x, std::int64_t n) {
  const T m = row_max(x, n);
  return {m, std::log(row_sum_exp<SumOrder::kLanesThenTail, T>(x, nullptr, n, m))};
}

// y = softmax(x) of one row whose maximum is max: the exponentials are stored, then scaled by the
// reciprocal of their sum (taken in double). y may be x itself.
template <SumOrder kOrder, typename T>
void store_softmax(const T* x, T* y, std::int64_t n, T max) {
  const T inv = static_cast<T>(1.0 / row_sum_exp<kOrder, T>(x, y, n, max));
  for (std::int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// y = log_softmax(x) of one row, as (x - max) - log_sum (see RowStats).
template <typename T>
void store_log_softmax(const T* x, T* y, std::int64_t n) {
  const RowStats<T> st = row_stats(x, n);
  const T log_sum = static_cast<T>(st.log_sum);
  for (std::int64_t j = 0; j < n; ++j) y[j] = (x[j] - st.max) - log_sum;
}

}  // namespace
}  // namespace define::kernels::cpu::row_math
