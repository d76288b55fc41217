// Fast CPU adaptive softmax. Every row of the head and of each tail is independent (OpenMP over
// rows; a tail row adds to the loss of its own target row only, and each row is in at most one
// tail, so no two threads write the same element). The row max / sum-of-exp reductions (lane
// partials that vectorise without -ffast-math, totals in double) and the float32 polynomial exp
// are shared with the other softmax-style families (kernels/cpu/row_math.h).
#include "kernels/cpu/adaptive_softmax.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "kernels/cpu/row_math.h"

namespace define::kernels::cpu {
namespace {

using row_math::row_stats;
using row_math::row_sum;
using row_math::RowStats;
using row_math::store_log_softmax;
using row_math::SumOrder;

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements; below this one thread is faster

std::int64_t head_slot(const std::vector<std::int64_t>& bounds, std::int64_t t) {
  if (t < bounds[0]) return t;
  return bounds[0] + (std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin() - 1);
}

bool parallel(std::int64_t rows, std::int64_t width) { return rows * width > kParallelGrain; }

// grad[j] = s * (exp(x[j] - lse) - [j == hit]).
template <typename T>
void softmax_minus_onehot(const T* x, T* grad, std::int64_t w, T lse, std::int64_t hit, T s) {
  row_math::store_scaled_exp(x, grad, w, lse, s, T(0));  // s * exp(x - lse) - 0: the same bits
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
    T* lp = hlp + r * h;
    store_log_softmax(x + r * h, lp, h);
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
      const T s = static_cast<T>(row_sum<SumOrder::kLanesThenTail>(g, w));
      const T cluster_lp = hlp[r * h + slot];
      T* dt = grad_tails[i].data<T>() + r * w;
      // Tail log-probabilities are out - cluster_lp: d tail = dout - softmax(tail) * s.
      row_math::store_minus_scaled_exp(g, lp, dt, w, cluster_lp, s);
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
