// Fast CPU softmax-family kernels.
//
// Rows along the last dim (inner == 1, the common case: attention scores, vocabulary logits) are
// processed one row per OpenMP iteration with kLanes independent accumulators, so max/sum loops
// vectorise without -ffast-math. Softmax over an inner dim works on blocks of adjacent columns,
// vectorising across the columns instead. The row reductions and the float32 polynomial exp are
// shared with the other softmax-style families (kernels/cpu/row_math.h).
#include "kernels/cpu/softmax.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/loss_dispatch.h"
#include "kernels/cpu/row_math.h"
#include "kernels/softmax.h"

namespace define::kernels::cpu {
namespace {

using row_math::exp_fast;
using row_math::max_of;
using row_math::row_dot;
using row_math::row_max;
using row_math::row_stats;
using row_math::row_sum;
using row_math::store_log_softmax;
using row_math::store_softmax;
using row_math::SumOrder;

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements; below this, threads cost more than they save
constexpr std::int64_t kColumnBlock = 64;          // columns per task when the softmax dim is not the last
// The orders (row_math::SumOrder) in which this family has always added up its rows: sums of
// exponentials lanes first, sums of dy and of dy * y tail first.
constexpr SumOrder kExpOrder = SumOrder::kLanesThenTail;
constexpr SumOrder kDotOrder = SumOrder::kTailPlusLanes;

// Runs row_fn(offset of row start, n) over every contiguous row (softmax over the last dim), or
// block_fn(offset of block start, n, inner, width) over blocks of adjacent columns otherwise.
template <typename RowFn, typename BlockFn>
void for_rows(const Shape& shape, int dim, RowFn row_fn, BlockFn block_fn) {
  const SoftmaxLayout l = softmax_layout(shape, dim);
  const std::int64_t total = l.outer * l.n * l.inner;
  if (l.inner == 1) {
#pragma omp parallel for if (total > kParallelGrain) schedule(static)
    for (std::int64_t r = 0; r < l.outer; ++r) row_fn(r * l.n, l.n);
    return;
  }
  const std::int64_t blocks = (l.inner + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for if (total > kParallelGrain) schedule(static)
  for (std::int64_t task = 0; task < l.outer * blocks; ++task) {
    const std::int64_t o = task / blocks, c0 = (task % blocks) * kColumnBlock;
    block_fn(o * l.n * l.inner + c0, l.n, l.inner, std::min(kColumnBlock, l.inner - c0));
  }
}

// Column-block helpers: `w` columns starting at x, rows `inner` apart.
template <typename T>
void block_max(const T* x, std::int64_t n, std::int64_t inner, std::int64_t w, T* m) {
  for (std::int64_t c = 0; c < w; ++c) m[c] = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t c = 0; c < w; ++c) m[c] = max_of(m[c], x[j * inner + c]);
}

template <typename T>
void softmax_typed(const Tensor& x, const Tensor& y, int dim, bool log) {
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for_rows(
      x.shape(), dim,
      [&](std::int64_t off, std::int64_t n) {
        if (log)
          store_log_softmax(xp + off, yp + off, n);
        else
          store_softmax<kExpOrder>(xp + off, yp + off, n, row_max(xp + off, n));
      },
      [&](std::int64_t off, std::int64_t n, std::int64_t inner, std::int64_t w) {
        const T* xb = xp + off;
        T* yb = yp + off;
        T m[kColumnBlock], s[kColumnBlock] = {};
        block_max(xb, n, inner, w, m);
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) {
            const T e = exp_fast(xb[j * inner + c] - m[c]);
            if (!log) yb[j * inner + c] = e;
            s[c] += e;
          }
        for (std::int64_t c = 0; c < w; ++c) s[c] = log ? std::log(s[c]) : T(1) / s[c];
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) {
            T& out = yb[j * inner + c];
            out = log ? (xb[j * inner + c] - m[c]) - s[c] : out * s[c];
          }
      });
}

template <typename T>
void softmax_backward_typed(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim, bool log) {
  const T* yp = y.data<T>();
  const T* gp = dy.data<T>();
  T* dp = dx.data<T>();
  for_rows(
      y.shape(), dim,
      [&](std::int64_t off, std::int64_t n) {
        const T* yr = yp + off;
        const T* gr = gp + off;
        T* dr = dp + off;
        if (log) {  // dx = dy - exp(y) * sum(dy)
          const T s = static_cast<T>(row_sum<kDotOrder>(gr, n));
          row_math::store_minus_scaled_exp(gr, yr, dr, n, T(0), s);  // exp(y - 0) is exp(y)
        } else {  // dx = y * (dy - sum(dy * y))
          const T dot = static_cast<T>(row_dot<kDotOrder>(gr, yr, n));
          for (std::int64_t j = 0; j < n; ++j) dr[j] = yr[j] * (gr[j] - dot);
        }
      },
      [&](std::int64_t off, std::int64_t n, std::int64_t inner, std::int64_t w) {
        const T* yb = yp + off;
        const T* gb = gp + off;
        T* db = dp + off;
        T s[kColumnBlock] = {};
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) s[c] += log ? gb[j * inner + c] : gb[j * inner + c] * yb[j * inner + c];
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) {
            const std::int64_t k = j * inner + c;
            db[k] = log ? gb[k] - exp_fast(yb[k]) * s[c] : yb[k] * (gb[k] - s[c]);
          }
      });
}

template <typename T, typename I>
void cross_entropy_rows_typed(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse,
                              std::int64_t ignore_index, double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  const T* x = logits.data<T>();
  const I* t = target.data<I>();
  T* lp = loss.data<T>();
  T* lsep = lse.data<T>();
#pragma omp parallel for if (rows * classes > kParallelGrain) schedule(static)
  for (std::int64_t i = 0; i < rows; ++i) {
    if (ignored(t[i], ignore_index)) {
      lp[i] = 0;
      lsep[i] = 0;
      continue;
    }
    // One pass for the max, one for sum(exp): the log-softmax itself is never stored.
    const T* xr = x + i * classes;
    const double row_lse = row_stats(xr, classes).lse();
    const double mean_x = label_smoothing > 0 ? row_sum<kDotOrder>(xr, classes) / double(classes) : 0.0;
    lp[i] = static_cast<T>((1.0 - label_smoothing) * (row_lse - double(xr[t[i]])) +
                           label_smoothing * (row_lse - mean_x));
    lsep[i] = static_cast<T>(row_lse);
  }
}

template <typename T, typename I>
void cross_entropy_backward_typed(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                  const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_logits,
                                  std::int64_t ignore_index, double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  const bool per_row = grad_loss.numel() != 1;
  const T* x = logits.data<T>();
  const T* l = lse.data<T>();
  const T* g = grad_loss.data<T>();
  const I* t = target.data<I>();
  const double w = total_weight.data<T>()[0];
  T* dx = grad_logits.data<T>();
#pragma omp parallel for if (rows * classes > kParallelGrain) schedule(static)
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * classes;
    T* dr = dx + i * classes;
    if (ignored(t[i], ignore_index)) {
      for (std::int64_t c = 0; c < classes; ++c) dr[c] = 0;
      continue;
    }
    // scale * (softmax - eps / C) everywhere, then the target's (1 - eps) one-hot share.
    const double scale = double(g[per_row ? i : 0]) / w;
    const T s = static_cast<T>(scale), lse_i = l[i];
    const T smooth = static_cast<T>(scale * label_smoothing / double(classes));
    row_math::store_scaled_exp(xr, dr, classes, lse_i, s, smooth);
    dr[t[i]] = static_cast<T>(double(dr[t[i]]) - scale * (1.0 - label_smoothing));
  }
}

template <typename T, typename I>
void nll_backward_typed(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                        const Tensor& grad_log_probs, std::int64_t ignore_index) {
  const std::int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1), n = rows * classes;
  const bool per_row = grad_loss.numel() != 1;
  const T* g = grad_loss.data<T>();
  const I* t = target.data<I>();
  const double w = total_weight.data<T>()[0];
  T* dx = grad_log_probs.data<T>();
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (std::int64_t k = 0; k < n; ++k) dx[k] = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    if (!ignored(t[i], ignore_index)) dx[i * classes + t[i]] = static_cast<T>(-double(g[per_row ? i : 0]) / w);
}

}  // namespace

void softmax(const Tensor& x, const Tensor& y, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "softmax", [&] { softmax_typed<scalar_t>(x, y, dim, false); });
}

void log_softmax(const Tensor& x, const Tensor& y, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "log_softmax", [&] { softmax_typed<scalar_t>(x, y, dim, true); });
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  DEFINE_DISPATCH_FLOAT(y.dtype(), "softmax_backward", [&] { softmax_backward_typed<scalar_t>(y, dy, dx, dim, false); });
}

void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  DEFINE_DISPATCH_FLOAT(y.dtype(), "log_softmax_backward",
                        [&] { softmax_backward_typed<scalar_t>(y, dy, dx, dim, true); });
}

void cross_entropy_rows(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse,
                        std::int64_t ignore_index, double label_smoothing) {
  dispatch_loss("cross_entropy", logits.dtype(), target.dtype(), [&]<typename T, typename I>() {
    cross_entropy_rows_typed<T, I>(logits, target, loss, lse, ignore_index, label_smoothing);
  });
}

void nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& loss, std::int64_t ignore_index) {
  dispatch_loss("nll_loss", log_probs.dtype(), target.dtype(), [&]<typename T, typename I>() {
    const std::int64_t rows = log_probs.size(0), classes = log_probs.size(1);
    const T* x = log_probs.data<T>();
    const I* t = target.data<I>();
    T* lp = loss.data<T>();
    for (std::int64_t i = 0; i < rows; ++i) lp[i] = ignored(t[i], ignore_index) ? T(0) : -x[i * classes + t[i]];
  });
}

void reduce_loss_rows(const Tensor& rows, const Tensor& target, const Tensor& loss, const Tensor& total_weight,
                      std::int64_t ignore_index, bool mean) {
  // One sequential double sum: O(rows) next to the O(rows * classes) loss kernels, and it keeps
  // the loss bit-identical whatever the thread count.
  dispatch_loss("reduce_loss_rows", rows.dtype(), target.dtype(), [&]<typename T, typename I>() {
    const T* r = rows.data<T>();
    const I* t = target.data<I>();
    double sum = 0;
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < rows.numel(); ++i) {
      if (ignored(t[i], ignore_index)) continue;
      sum += r[i];
      ++count;
    }
    const double w = mean ? double(count) : 1.0;
    loss.data<T>()[0] = static_cast<T>(w > 0 ? sum / w : 0.0);
    total_weight.data<T>()[0] = static_cast<T>(w);
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                            const Tensor& total_weight, const Tensor& grad_logits, std::int64_t ignore_index,
                            double label_smoothing) {
  dispatch_loss("cross_entropy_backward", logits.dtype(), target.dtype(), [&]<typename T, typename I>() {
    cross_entropy_backward_typed<T, I>(logits, lse, target, grad_loss, total_weight, grad_logits, ignore_index,
                                       label_smoothing);
  });
}

void nll_backward(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                  const Tensor& grad_log_probs, std::int64_t ignore_index) {
  dispatch_loss("nll_loss_backward", grad_log_probs.dtype(), target.dtype(), [&]<typename T, typename I>() {
    nll_backward_typed<T, I>(target, grad_loss, total_weight, grad_log_probs, ignore_index);
  });
}

}  // namespace define::kernels::cpu
