// Softmax family: softmax / log_softmax along any dim, their fused backward kernels, and the
// classification losses built on them (cross entropy with a fused log-softmax, NLL).
// Entry points validate, make inputs contiguous and allocate outputs; kernels/ref/softmax.cpp is
// the double-accumulating oracle and kernels/cpu/softmax.cpp the fast path.
//
// Loss reductions are split in two steps so that every backend keeps the data on its device:
// a per-row kernel (loss of each row, 0 for ignored targets) and reduce_loss_rows(), which
// produces the reduced loss and the "total weight" the gradient is divided by (the number of
// non-ignored rows for a mean, 1 for a sum). The backward kernels take that weight as a tensor.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

// A contiguous tensor seen as [outer, n, inner] around the softmax dim (n = size of that dim).
struct SoftmaxLayout {
  std::int64_t outer = 1, n = 1, inner = 1;
};
SoftmaxLayout softmax_layout(const Shape& shape, int dim);

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
// y = softmax(x): dx = y * (dy - sum(dy * y)) along dim.
Tensor softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t dim);
// y = log_softmax(x): dx = dy - exp(y) * sum(dy) along dim.
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t dim);

// Per-row cross entropy of logits [N, C] against target [N] (int32/int64):
//   loss_i = lse_i - (1 - eps) * x[i, t_i] - eps * mean_c x[i, c],   lse_i = log sum_c exp x[i, c]
// which equals (1 - eps) * nll + eps * mean_c(-log p_c). Rows whose target is ignore_index get
// loss 0. lse (kept for the backward pass, so softmax is never recomputed from scratch) is 0 there.
struct CrossEntropyRows {
  Tensor loss;  // [N]
  Tensor lse;   // [N]
};
CrossEntropyRows cross_entropy_rows(const Tensor& logits, const Tensor& target, std::int64_t ignore_index,
                                    double label_smoothing);
// Per-row negative log likelihood: loss_i = -log_probs[i, t_i] (0 for ignored rows).
Tensor nll_rows(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index, const char* op = "nll_loss");

// Sum (mean = false) or mean over non-ignored rows (mean = true) of per-row losses.
// total_weight is 1 for a sum and the number of non-ignored rows for a mean; when every row is
// ignored the mean is 0 (not NaN) and total_weight is 0.
struct ReducedLoss {
  Tensor loss;          // [] scalar
  Tensor total_weight;  // [] scalar
};
ReducedLoss reduce_loss_rows(const Tensor& rows, const Tensor& target, std::int64_t ignore_index, bool mean);

// d loss / d logits in one pass: row i = g_i / w * (softmax(x_i) - (1 - eps) * onehot(t_i) - eps / C),
// zero for ignored rows. grad_loss is [N] (no reduction) or a one-element tensor (sum/mean);
// total_weight w is a one-element tensor.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                              const Tensor& grad_loss, const Tensor& total_weight, std::int64_t ignore_index,
                              double label_smoothing);
// d loss / d log_probs: -g_i / w at [i, t_i], zero elsewhere.
Tensor nll_backward(const Shape& log_probs_shape, const Tensor& target, const Tensor& grad_loss,
                    const Tensor& total_weight, std::int64_t ignore_index);

// Throws "<op>: target 12 out of range for 10 classes" for a target outside [0, C) that is not
// ignore_index. CPU targets only: device targets are checked by the CUDA loss kernels, which
// report the same message at the device's next synchronisation point (kernels/cuda/index_error.h).
void check_targets(const char* op, const Tensor& target, std::int64_t classes, std::int64_t ignore_index);

}  // namespace define::kernels
