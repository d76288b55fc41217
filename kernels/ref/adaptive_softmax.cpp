// Reference adaptive softmax. Each formula of kernels/adaptive_softmax.h written out directly:
// the log-sum-exp of a row is max + log(sum exp(x - max)) in double; the loss, gradients and
// log-probabilities are assembled per row in double and rounded once.
#include "kernels/ref/adaptive_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"

namespace define::kernels::ref {
namespace {

template <typename T>
double row_lse(const T* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, double(x[j]));
  double s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(double(x[j]) - m);
  return m + std::log(s);
}

// Column of the head that scores word t: t itself in the shortlist, else its cluster's logit.
std::int64_t head_slot(const std::vector<std::int64_t>& bounds, std::int64_t t) {
  if (t < bounds[0]) return t;
  const auto tail = std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin() - 1;
  return bounds[0] + tail;
}

template <typename T, typename I>
void forward_typed(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& tail_rows,
                   const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                   const Tensor& loss, const Tensor& head_lse, const std::vector<Tensor>& tail_lse) {
  const std::int64_t n = head.size(0), h = head.size(1);
  const T* x = head.data<T>();
  const I* t = target.data<I>();
  std::vector<double> nll(static_cast<std::size_t>(n), 0.0), lse(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t r = 0; r < n; ++r) {
    if (std::int64_t(t[r]) == ignore_index) continue;
    lse[r] = row_lse(x + r * h, h);
    nll[r] = lse[r] - double(x[r * h + head_slot(bounds, t[r])]);
  }
  for (std::size_t i = 0; i < tails.size(); ++i) {
    const std::int64_t w = tails[i].size(1);
    const T* y = tails[i].data<T>();
    const std::int64_t* rows = tail_rows[i].data<std::int64_t>();
    T* out_lse = tail_lse[i].data<T>();
    for (std::int64_t k = 0; k < tails[i].size(0); ++k) {
      const std::int64_t r = rows[k];
      const double l = row_lse(y + k * w, w);
      nll[r] += l - double(y[k * w + (std::int64_t(t[r]) - bounds[i])]);
      out_lse[k] = static_cast<T>(l);
    }
  }
  for (std::int64_t r = 0; r < n; ++r) {
    loss.data<T>()[r] = static_cast<T>(nll[r]);
    head_lse.data<T>()[r] = static_cast<T>(lse[r]);
  }
}

// grad[k, j] = s * (exp(x[k, j] - lse) - [j == hit]) over one row.
template <typename T>
void softmax_minus_onehot(const T* x, T* grad, std::int64_t w, double lse, std::int64_t hit, double s) {
  for (std::int64_t j = 0; j < w; ++j)
    grad[j] = static_cast<T>(s * (std::exp(double(x[j]) - lse) - (j == hit ? 1.0 : 0.0)));
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
  const auto scale = [&](std::int64_t r) { return double(g[per_row ? r : 0]) / w; };
  for (std::int64_t r = 0; r < n; ++r) {
    T* dh = grad_head.data<T>() + r * h;
    if (std::int64_t(t[r]) == ignore_index) {
      std::fill(dh, dh + h, T(0));
      continue;
    }
    softmax_minus_onehot(head.data<T>() + r * h, dh, h, double(head_lse.data<T>()[r]), head_slot(bounds, t[r]),
                         scale(r));
  }
  for (std::size_t i = 0; i < tails.size(); ++i) {
    const std::int64_t width = tails[i].size(1);
    const std::int64_t* rows = tail_rows[i].data<std::int64_t>();
    for (std::int64_t k = 0; k < tails[i].size(0); ++k) {
      const std::int64_t r = rows[k];
      softmax_minus_onehot(tails[i].data<T>() + k * width, grad_tails[i].data<T>() + k * width, width,
                           double(tail_lse[i].data<T>()[k]), std::int64_t(t[r]) - bounds[i], scale(r));
    }
  }
}

template <typename T>
void log_prob_typed(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<std::int64_t>& bounds,
                    const Tensor& out, const Tensor& head_lp) {
  const std::int64_t n = head.size(0), h = head.size(1), v = bounds.back();
  for (std::int64_t r = 0; r < n; ++r) {
    const T* x = head.data<T>() + r * h;
    std::vector<double> lp(static_cast<std::size_t>(h));
    const double lse = row_lse(x, h);
    for (std::int64_t j = 0; j < h; ++j) {
      lp[j] = double(x[j]) - lse;
      head_lp.data<T>()[r * h + j] = static_cast<T>(lp[j]);
    }
    T* o = out.data<T>() + r * v;
    for (std::int64_t j = 0; j < bounds[0]; ++j) o[j] = static_cast<T>(lp[j]);
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t w = tails[i].size(1);
      const T* y = tails[i].data<T>() + r * w;
      const double tail_lse = row_lse(y, w);
      const double cluster_lp = lp[bounds[0] + static_cast<std::int64_t>(i)];
      for (std::int64_t j = 0; j < w; ++j) o[bounds[i] + j] = static_cast<T>(cluster_lp + (double(y[j]) - tail_lse));
    }
  }
}

template <typename T>
void log_prob_backward_typed(const Tensor& out, const Tensor& head_lp, const Tensor& grad_out,
                             const std::vector<std::int64_t>& bounds, const std::vector<Tensor>& grad_tails,
                             const Tensor& grad_head_lp) {
  const std::int64_t n = head_lp.size(0), h = head_lp.size(1), v = bounds.back();
  for (std::int64_t r = 0; r < n; ++r) {
    const T* o = out.data<T>() + r * v;
    const T* go = grad_out.data<T>() + r * v;
    T* dlp = grad_head_lp.data<T>() + r * h;
    for (std::int64_t j = 0; j < bounds[0]; ++j) dlp[j] = go[j];
    for (std::size_t i = 0; i < grad_tails.size(); ++i) {
      const std::int64_t w = grad_tails[i].size(1), c = bounds[i];
      const double cluster_lp = double(head_lp.data<T>()[r * h + bounds[0] + static_cast<std::int64_t>(i)]);
      double s = 0;
      for (std::int64_t j = 0; j < w; ++j) s += double(go[c + j]);
      T* dt = grad_tails[i].data<T>() + r * w;
      // The tail's own log-probabilities are out - cluster_lp; d/d tail = dout - softmax(tail) * s.
      for (std::int64_t j = 0; j < w; ++j)
        dt[j] = static_cast<T>(double(go[c + j]) - std::exp(double(o[c + j]) - cluster_lp) * s);
      dlp[bounds[0] + static_cast<std::int64_t>(i)] = static_cast<T>(s);
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

}  // namespace define::kernels::ref
