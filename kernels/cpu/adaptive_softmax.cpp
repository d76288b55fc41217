// Fast CPU adaptive softmax. Every row of the head and of each tail is independent (OpenMP over
// rows; a tail row adds to the loss of its own target row only, and each row is in at most one
// tail, so no two threads write the same element). Row reductions use kLanes independent
// accumulators so the max and sum-of-exp loops vectorise without -ffast-math; float32 uses a
// polynomial exp the compiler vectorises (std::exp is a scalar libm call and would dominate a
// vocabulary-wide row), float64 keeps std::exp. Sums of exponentials end in double.
#include "kernels/cpu/adaptive_softmax.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements; below this one thread is faster
constexpr int kLanes = 16;                         // independent accumulators (one AVX-512 vector of float)

// exp(x) for float32 to a few ulp: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by its degree-7 Taylor
// polynomial, 2^n written into the exponent bits. Below -87 the result is exactly 0 (so -inf
// logits get probability 0); NaN stays NaN.
inline float exp_poly(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;              // short mantissa: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440054690583e-4f;  // ln2 - kLn2Hi
  constexpr float kRound = 12582912.0f;               // 1.5 * 2^23: adding it rounds to an integer
  const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::uint32_t ni = std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(kRound);
  const float scale = std::bit_cast<float>((ni + 127u) << 23);
  return x < -87.0f ? 0.0f : p * scale;
}
inline double exp_poly(double x) { return std::exp(x); }

template <typename T>
T max_of(T a, T b) {
  return b > a ? b : a;  // maps onto vector max instructions
}

template <typename T>
T row_max(const T* x, std::int64_t n) {
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -std::numeric_limits<T>::infinity();
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = max_of(acc[l], x[j + l]);
  T m = -std::numeric_limits<T>::infinity();
  for (; j < n; ++j) m = max_of(m, x[j]);
  for (int l = 0; l < kLanes; ++l) m = max_of(m, acc[l]);
  return m;
}

// sum_j exp(x_j - shift), lanes in T, the total in double.
template <typename T>
double row_sum_exp(const T* x, std::int64_t n, T shift) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += exp_poly(x[j + l] - shift);
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += exp_poly(x[j] - shift);
  return s;
}

template <typename T>
double row_sum(const T* x, std::int64_t n) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += x[j];
  return s;
}

// A row's maximum and log(sum exp(x - max)): log-probabilities are (x - max) - log_sum, which
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
  return {m, std::log(row_sum_exp(x, n, m))};
}

std::int64_t head_slot(const std::vector<std::int64_t>& bounds, std::int64_t t) {
  if (t < bounds[0]) return t;
  return bounds[0] + (std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin() - 1);
}

bool parallel(std::int64_t rows, std::int64_t width) { return rows * width > kParallelGrain; }

// grad[j] = s * (exp(x[j] - lse) - [j == hit]).
template <typename T>
void softmax_minus_onehot(const T* x, T* grad, std::int64_t w, T lse, std::int64_t hit, T s) {
  for (std::int64_t j = 0; j < w; ++j) grad[j] = s * exp_poly(x[j] - lse);
  grad[hit] -= s;
}

template <typename T, typename I>
void forward_typed(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& tail_rows,
                   const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                   const Tensor& loss, const Tensor& head_lse, const std::vector<Tensor>& tail_lse) {
  const std::int64_t n = head.size(0), h = head.size(1);
  const T* x = head.data<T>();
  const I* t = target.data<I>();
  T* lp = loss.data<T>();
  T* hl = head_lse.data<T>();
#pragma omp parallel for if (parallel(n, h)) schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    if (std::int64_t(t[r]) == ignore_index) {
      lp[r] = hl[r] = T(0);
      continue;
    }
    const double lse = row_stats(x + r * h, h).lse();
    lp[r] = static_cast<T>(lse - double(x[r * h + head_slot(bounds, t[r])]));
    hl[r] = static_cast<T>(lse);
  }
  for (std::size_t i = 0; i < tails.size(); ++i) {
    const std::int64_t rows = tails[i].size(0), w = tails[i].size(1);
    const T* y = tails[i].data<T>();
    const std::int64_t* idx = tail_rows[i].data<std::int64_t>();
    T* tl = tail_lse[i].data<T>();
    const std::int64_t first = bounds[i];
#pragma omp parallel for if (parallel(rows, w)) schedule(static)
    for (std::int64_t k = 0; k < rows; ++k) {
      const std::int64_t r = idx[k];
      const double lse = row_stats(y + k * w, w).lse();
      lp[r] = static_cast<T>(double(lp[r]) + (lse - double(y[k * w + (std::int64_t(t[r]) - first)])));
      tl[k] = static_cast<T>(lse);
    }
  }
}

template <typename T, typename I>
void backward_typed(const Tensor& head, const std::vector<Tensor>& tails, const Tensor& head_lse,
                    const std::vector<Tensor>& tail_lse, const std::vector<Tensor>& tail_rows, const Tensor& target,
                    const std::vector<std::int64_t>& bounds, std::int64_t ignore_index, const Tensor& grad_loss,
                    const Tensor& total_weight, const Tensor& grad_head, const std::vector<Tensor>& grad_tails) {
  const std::int64_t n = head.size(0), h = head.size(1);
  const I* t = target.data<I>();
  const T* g = grad_loss.data<T>();
  const bool per_row = grad_loss.numel() != 1;
  const double w = double(total_weight.data<T>()[0]);
  const auto scale = [&](std::int64_t r) { return static_cast<T>(double(g[per_row ? r : 0]) / w); };
  const T* x = head.data<T>();
  const T* hl = head_lse.data<T>();
  T* dh = grad_head.data<T>();
#pragma omp parallel for if (parallel(n, h)) schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    if (std::int64_t(t[r]) == ignore_index) {
      std::fill(dh + r * h, dh + (r + 1) * h, T(0));
      continue;
    }
    softmax_minus_onehot(x + r * h, dh + r * h, h, hl[r], head_slot(bounds, t[r]), scale(r));
  }
  for (std::size_t i = 0; i < tails.size(); ++i) {
    const std::int64_t rows = tails[i].size(0), width = tails[i].size(1);
    const T* y = tails[i].data<T>();
    const T* tl = tail_lse[i].data<T>();
    const std::int64_t* idx = tail_rows[i].data<std::int64_t>();
    T* dt = grad_tails[i].data<T>();
    const std::int64_t first = bounds[i];
#pragma omp parallel for if (parallel(rows, width)) schedule(static)
    for (std::int64_t k = 0; k < rows; ++k) {
      const std::int64_t r = idx[k];
      softmax_minus_onehot(y + k * width, dt + k * width, width, tl[k], std::int64_t(t[r]) - first, scale(r));
    }
  }
}

template <typename T>
void log_prob_typed(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<std::int64_t>& bounds,
                    const Tensor& out, const Tensor& head_lp) {
  const std::int64_t n = head.size(0), h = head.size(1), v = bounds.back();
  const T* x = head.data<T>();
  T* hlp = head_lp.data<T>();
  T* o = out.data<T>();
#pragma omp parallel for if (parallel(n, v)) schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    const RowStats<T> st = row_stats(x + r * h, h);
    const T log_sum = static_cast<T>(st.log_sum);
    T* lp = hlp + r * h;
    for (std::int64_t j = 0; j < h; ++j) lp[j] = (x[r * h + j] - st.max) - log_sum;
    std::memcpy(o + r * v, lp, static_cast<std::size_t>(bounds[0]) * sizeof(T));
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t w = tails[i].size(1);
      const T* y = tails[i].data<T>() + r * w;
      const RowStats<T> ts = row_stats(y, w);
      const T tail_log_sum = static_cast<T>(ts.log_sum);
      const T cluster_lp = lp[bounds[0] + static_cast<std::int64_t>(i)];
      T* dst = o + r * v + bounds[i];
      for (std::int64_t j = 0; j < w; ++j) dst[j] = cluster_lp + ((y[j] - ts.max) - tail_log_sum);
    }
  }
}

template <typename T>
void log_prob_backward_typed(const Tensor& out, const Tensor& head_lp, const Tensor& grad_out,
                             const std::vector<std::int64_t>& bounds, const std::vector<Tensor>& grad_tails,
                             const Tensor& grad_head_lp) {
  const std::int64_t n = head_lp.size(0), h = head_lp.size(1), v = bounds.back();
  const T* o = out.data<T>();
  const T* go = grad_out.data<T>();
  const T* hlp = head_lp.data<T>();
  T* dlp = grad_head_lp.data<T>();
#pragma omp parallel for if (parallel(n, v)) schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    std::memcpy(dlp + r * h, go + r * v, static_cast<std::size_t>(bounds[0]) * sizeof(T));
    for (std::size_t i = 0; i < grad_tails.size(); ++i) {
      const std::int64_t w = grad_tails[i].size(1);
      const std::int64_t slot = bounds[0] + static_cast<std::int64_t>(i);
      const T* g = go + r * v + bounds[i];
      const T* lp = o + r * v + bounds[i];
      const T s = static_cast<T>(row_sum(g, w));
      const T cluster_lp = hlp[r * h + slot];
      T* dt = grad_tails[i].data<T>() + r * w;
      // Tail log-probabilities are out - cluster_lp: d tail = dout - softmax(tail) * s.
      for (std::int64_t j = 0; j < w; ++j) dt[j] = g[j] - exp_poly(lp[j] - cluster_lp) * s;
      dlp[r * h + slot] = s;
    }
  }
}

}  // namespace

void adaptive_softmax_forward(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& tail_rows,
                              const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                              const Tensor& loss, const Tensor& head_lse, const std::vector<Tensor>& tail_lse) {
  DEFINE_DISPATCH_FLOAT(head.dtype(), "adaptive_softmax", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(target.dtype(), "adaptive_softmax", [&] {
      forward_typed<T, scalar_t>(head, tails, tail_rows, target, bounds, ignore_index, loss, head_lse, tail_lse);
    });
  });
}

void adaptive_softmax_backward(const Tensor& head, const std::vector<Tensor>& tails, const Tensor& head_lse,
                               const std::vector<Tensor>& tail_lse, const std::vector<Tensor>& tail_rows,
                               const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                               const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_head,
                               const std::vector<Tensor>& grad_tails) {
  DEFINE_DISPATCH_FLOAT(head.dtype(), "adaptive_softmax_backward", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(target.dtype(), "adaptive_softmax_backward", [&] {
      backward_typed<T, scalar_t>(head, tails, head_lse, tail_lse, tail_rows, target, bounds, ignore_index, grad_loss,
                                  total_weight, grad_head, grad_tails);
    });
  });
}

void adaptive_log_prob(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<std::int64_t>& bounds,
                       const Tensor& out, const Tensor& head_lp) {
  DEFINE_DISPATCH_FLOAT(head.dtype(), "adaptive_log_prob",
                        [&] { log_prob_typed<scalar_t>(head, tails, bounds, out, head_lp); });
}

void adaptive_log_prob_backward(const Tensor& out, const Tensor& head_lp, const Tensor& grad_out,
                                const std::vector<std::int64_t>& bounds, const std::vector<Tensor>& grad_tails,
                                const Tensor& grad_head_lp) {
  DEFINE_DISPATCH_FLOAT(out.dtype(), "adaptive_log_prob_backward", [&] {
    log_prob_backward_typed<scalar_t>(out, head_lp, grad_out, bounds, grad_tails, grad_head_lp);
  });
}

}  // namespace define::kernels::cpu
