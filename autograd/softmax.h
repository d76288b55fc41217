// Softmax, log-softmax and the classification losses, differentiable.
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

// The output layer and its loss in one op: cross_entropy(linear(x, weight, bias), target, ...)
// with x [..., in], weight [C, in], bias [C] or undefined and target of x's leading shape; the
// same result and gradients (up to float rounding), with the logits walked once each way on the
// CPU (kernels/linear_cross_entropy.h). Reduction::None gives one loss per row of the flattened
// leading dims ([rows]). With `unsmoothed` given, it receives the same loss without label
// smoothing, reduced alike and without graph: what a label-smoothed trainer logs, from the same
// logits (on the CPU at no extra pass over them).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target,
                            std::int64_t ignore_index = -100, double label_smoothing = 0.0,
                            Reduction reduction = Reduction::Mean, Tensor* unsmoothed = nullptr);

// Negative log likelihood of log-probabilities [N, C] against class targets [N]:
// row loss -log_probs[i, target_i]. Same ignore_index and reduction rules as cross_entropy.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index = -100,
                Reduction reduction = Reduction::Mean);

}  // namespace define
