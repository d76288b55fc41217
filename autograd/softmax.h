// Softmax, log-softmax and the classification losses, differentiable. The output layer with its
// loss as one op (linear_cross_entropy) is in autograd/linear_cross_entropy.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define {

// How a loss over rows is reduced to its result.
enum class Reduction {
  None,  // one loss per row ([N]); ignored rows give 0
  Mean,  // average over the rows whose target is not ignore_index (0 when every row is ignored)
  Sum,   // sum over all rows (ignored rows contribute 0)
};

// exp(x) / sum exp(x) along dim (negative dims count from the end). Numerically stable: the row
// maximum is subtracted first, so large logits do not overflow.
Tensor softmax(const Tensor& x, std::int64_t dim);
// x - log sum exp(x) along dim, computed directly (never as log(softmax(x))).
Tensor log_softmax(const Tensor& x, std::int64_t dim);

// Cross entropy of logits [N, C] (float) against class targets [N] (int32/int64), with a fused
// log-softmax. With label smoothing eps the row loss is (1 - eps) * nll + eps * mean_c(-log p_c).
// Rows whose target is ignore_index contribute nothing (and do not count towards the mean).
// Other targets must lie in [0, C): "cross_entropy: target 12 out of range for 10 classes".
Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::Mean);

// Negative log likelihood of log-probabilities [N, C] against class targets [N]:
// row loss -log_probs[i, target_i]. Same ignore_index and reduction rules as cross_entropy.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index = -100,
                Reduction reduction = Reduction::Mean);

namespace detail {
// Applies `reduction` to per-row losses (shared by the losses above and linear_cross_entropy; not
// differentiable itself). total_weight receives what the backward pass divides by: the
// non-ignored row count for a mean, 1 otherwise (a scalar tensor in every case).
Tensor reduce_rows(const Tensor& rows, const Tensor& target, std::int64_t ignore_index, Reduction reduction,
                   Tensor& total_weight);
}  // namespace detail

}  // namespace define
