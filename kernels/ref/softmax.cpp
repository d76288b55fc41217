// Reference softmax-family kernels: the oracle the fast paths are tested against. Plain loops,
// every sum accumulated in double, std::exp/std::log; inputs are contiguous.
#include "kernels/ref/softmax.h"

#include <cmath>
#include <limits>

#include "kernels/softmax.h"

namespace define::kernels::ref {
namespace {

// Calls f(base, stride) for every softmax row: element j of the row is at base + j * stride.
template <typename F>
void for_each_row(const Shape& shape, int dim, F&& f) {
  const SoftmaxLayout l = softmax_layout(shape, dim);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i) f(o * l.n * l.inner + i, l.inner, l.n);
}

template <typename T>
double row_max(const T* x, std::int64_t base, std::int64_t stride, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    const double v = x[base + j * stride];
    if (std::isnan(v)) return v;
    m = std::max(m, v);
  }
  return m;
}

template <typename T>
double row_sum_exp(const T* x, std::int64_t base, std::int64_t stride, std::int64_t n, double shift) {
  double s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(double(x[base + j * stride]) - shift);
  return s;
}

template <typename I>
bool ignored(I t, std::int64_t ignore_index) {
  return static_cast<std::int64_t>(t) == ignore_index;
}

}  // namespace

void softmax(const Tensor& x, const Tensor& y, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "softmax", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = y.data<scalar_t>();
    for_each_row(x.shape(), dim, [&](std::int64_t base, std::int64_t stride, std::int64_t n) {
      const double m = row_max(xp, base, stride, n);
      const double s = row_sum_exp(xp, base, stride, n, m);
      for (std::int64_t j = 0; j < n; ++j)
        yp[base + j * stride] = static_cast<scalar_t>(std::exp(double(xp[base + j * stride]) - m) / s);
    });
  });
}

void log_softmax(const Tensor& x, const Tensor& y, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "log_softmax", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = y.data<scalar_t>();
    for_each_row(x.shape(), dim, [&](std::int64_t base, std::int64_t stride, std::int64_t n) {
      const double m = row_max(xp, base, stride, n);
      const double log_sum = std::log(row_sum_exp(xp, base, stride, n, m));
      for (std::int64_t j = 0; j < n; ++j)
        yp[base + j * stride] = static_cast<scalar_t>((double(xp[base + j * stride]) - m) - log_sum);
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  DEFINE_DISPATCH_FLOAT(y.dtype(), "softmax_backward", [&] {
    const scalar_t* yp = y.data<scalar_t>();
    const scalar_t* gp = dy.data<scalar_t>();
    scalar_t* dp = dx.data<scalar_t>();
    for_each_row(y.shape(), dim, [&](std::int64_t base, std::int64_t stride, std::int64_t n) {
      double dot = 0;
      for (std::int64_t j = 0; j < n; ++j) dot += double(gp[base + j * stride]) * yp[base + j * stride];
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t k = base + j * stride;
        dp[k] = static_cast<scalar_t>(double(yp[k]) * (double(gp[k]) - dot));
      }
    });
  });
}

void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  DEFINE_DISPATCH_FLOAT(y.dtype(), "log_softmax_backward", [&] {
    const scalar_t* yp = y.data<scalar_t>();
    const scalar_t* gp = dy.data<scalar_t>();
    scalar_t* dp = dx.data<scalar_t>();
    for_each_row(y.shape(), dim, [&](std::int64_t base, std::int64_t stride, std::int64_t n) {
      double sum = 0;
      for (std::int64_t j = 0; j < n; ++j) sum += gp[base + j * stride];
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t k = base + j * stride;
        dp[k] = static_cast<scalar_t>(double(gp[k]) - std::exp(double(yp[k])) * sum);
      }
    });
  });
}

void cross_entropy_rows(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse,
                        std::int64_t ignore_index, double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  DEFINE_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    using T = scalar_t;
    const T* x = logits.data<T>();
    T* lp = loss.data<T>();
    T* lsep = lse.data<T>();
    DEFINE_DISPATCH_INDEX(target.dtype(), "cross_entropy", [&] {
      const scalar_t* t = target.data<scalar_t>();
      for (std::int64_t i = 0; i < rows; ++i) {
        if (ignored(t[i], ignore_index)) {
          lp[i] = 0;
          lsep[i] = 0;
          continue;
        }
        const std::int64_t base = i * classes;
        const double m = row_max(x, base, 1, classes);
        const double row_lse = m + std::log(row_sum_exp(x, base, 1, classes, m));
        double sum_x = 0;
        for (std::int64_t c = 0; c < classes; ++c) sum_x += x[base + c];
        // (1 - eps) * (lse - x_t) + eps * mean_c (lse - x_c). The smoothing term is skipped when
        // eps = 0, as in the fast paths: with a logit masked to -inf it would be 0 * inf = NaN.
        double l = (1.0 - label_smoothing) * (row_lse - double(x[base + t[i]]));
        if (label_smoothing != 0.0) l += label_smoothing * (row_lse - sum_x / double(classes));
        lp[i] = static_cast<T>(l);
        lsep[i] = static_cast<T>(row_lse);
      }
    });
  });
}

void nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& loss, std::int64_t ignore_index) {
  const std::int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  DEFINE_DISPATCH_FLOAT(log_probs.dtype(), "nll_loss", [&] {
    using T = scalar_t;
    const T* x = log_probs.data<T>();
    T* lp = loss.data<T>();
    DEFINE_DISPATCH_INDEX(target.dtype(), "nll_loss", [&] {
      const scalar_t* t = target.data<scalar_t>();
      for (std::int64_t i = 0; i < rows; ++i) lp[i] = ignored(t[i], ignore_index) ? T(0) : -x[i * classes + t[i]];
    });
  });
}

void reduce_loss_rows(const Tensor& rows, const Tensor& target, const Tensor& loss, const Tensor& total_weight,
                      std::int64_t ignore_index, bool mean) {
  const std::int64_t n = rows.numel();
  DEFINE_DISPATCH_FLOAT(rows.dtype(), "reduce_loss_rows", [&] {
    using T = scalar_t;
    const T* r = rows.data<T>();
    double sum = 0, count = 0;
    DEFINE_DISPATCH_INDEX(target.dtype(), "reduce_loss_rows", [&] {
      const scalar_t* t = target.data<scalar_t>();
      for (std::int64_t i = 0; i < n; ++i) {
        if (ignored(t[i], ignore_index)) continue;
        sum += r[i];
        count += 1;
      }
    });
    const double w = mean ? count : 1.0;
    loss.data<T>()[0] = static_cast<T>(w > 0 ? sum / w : 0.0);
    total_weight.data<T>()[0] = static_cast<T>(w);
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                            const Tensor& total_weight, const Tensor& grad_logits, std::int64_t ignore_index,
                            double label_smoothing) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  const bool per_row = grad_loss.numel() != 1;
  DEFINE_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", [&] {
    using T = scalar_t;
    const T* x = logits.data<T>();
    const T* l = lse.data<T>();
    const T* g = grad_loss.data<T>();
    const double w = total_weight.data<T>()[0];
    T* dx = grad_logits.data<T>();
    DEFINE_DISPATCH_INDEX(target.dtype(), "cross_entropy_backward", [&] {
      const scalar_t* t = target.data<scalar_t>();
      for (std::int64_t i = 0; i < rows; ++i) {
        const std::int64_t base = i * classes;
        if (ignored(t[i], ignore_index)) {
          for (std::int64_t c = 0; c < classes; ++c) dx[base + c] = 0;
          continue;
        }
        const double scale = double(g[per_row ? i : 0]) / w;
        for (std::int64_t c = 0; c < classes; ++c) {
          const double target_weight = (c == t[i] ? 1.0 - label_smoothing : 0.0) + label_smoothing / double(classes);
          dx[base + c] = static_cast<T>(scale * (std::exp(double(x[base + c]) - double(l[i])) - target_weight));
        }
      }
    });
  });
}

void nll_backward(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                  const Tensor& grad_log_probs, std::int64_t ignore_index) {
  const std::int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  const bool per_row = grad_loss.numel() != 1;
  DEFINE_DISPATCH_FLOAT(grad_log_probs.dtype(), "nll_loss_backward", [&] {
    using T = scalar_t;
    const T* g = grad_loss.data<T>();
    const double w = total_weight.data<T>()[0];
    T* dx = grad_log_probs.data<T>();
    for (std::int64_t k = 0; k < rows * classes; ++k) dx[k] = 0;
    DEFINE_DISPATCH_INDEX(target.dtype(), "nll_loss_backward", [&] {
      const scalar_t* t = target.data<scalar_t>();
      for (std::int64_t i = 0; i < rows; ++i)
        if (!ignored(t[i], ignore_index)) dx[i * classes + t[i]] = static_cast<T>(-double(g[per_row ? i : 0]) / w);
    });
  });
}

}  // namespace define::kernels::ref
