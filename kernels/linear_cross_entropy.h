// The output layer of a classifier with its loss: logits = x W^T + b and their per-row cross
// entropy (kernels/softmax.h's definition, label smoothing and ignore_index included), forward and
// backward. On the fast CPU backend one fused kernel does each direction
// (kernels/cpu/linear_cross_entropy.h: the logits cross memory once each way); on the reference
// backend and on GPUs the same results come from the family kernels (gemm, cross_entropy_rows,
// cross_entropy_backward, matmul, column_sum), which makes the reference backend the fused
// kernel's oracle. Entry points validate, make inputs contiguous and allocate outputs.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

struct LinearCrossEntropyRows {
  // [N, V], what the backward pass reads: the logits on the composed path; on the fused CPU path
  // each row's exp(logit - row_max) (the forward computes them anyway for the row's sum, and keeping
  // them spares the backward an exponential per element).
  Tensor saved;
  Tensor row_max;  // [N], the fused CPU path's row maxima (0 on ignored rows); undefined when composed
  Tensor loss;     // [N], 0 on ignored rows
  Tensor lse;      // [N], log sum exp of each row's logits, 0 on ignored rows
  Tensor nll;      // [N], the loss without label smoothing (lse - the target's logit), when asked for
};
// x [N, in], weight [V, in], bias [V] or undefined, target [N] (int32/int64). with_nll: also the
// unsmoothed loss of each row (what a label-smoothed trainer logs), at no extra pass on the CPU.
LinearCrossEntropyRows linear_cross_entropy_rows(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                 const Tensor& target, std::int64_t ignore_index,
                                                 double label_smoothing, bool with_nll = false);

struct LinearCrossEntropyGrads {
  Tensor x, weight, bias;  // each undefined unless asked for
};
// Gradients of sum_i g_i / w * loss_i with g = grad_loss (one element or [N]) and w =
// total_weight (one element), from the forward pass's saved, row_max and lse (the fused CPU kernel
// runs when row_max is defined, the composition otherwise).
LinearCrossEntropyGrads linear_cross_entropy_backward(const Tensor& x, const Tensor& weight, const Tensor& saved,
                                                      const Tensor& row_max, const Tensor& lse, const Tensor& target,
                                                      const Tensor& grad_loss, const Tensor& total_weight,
                                                      std::int64_t ignore_index, double label_smoothing, bool need_x,
                                                      bool need_weight, bool need_bias);

}  // namespace define::kernels
