// The output layer and its loss as one op, differentiable: cross_entropy(linear(x, weight, bias),
// target) without materialising the logits' gradient (kernels/linear_cross_entropy.h). Reduction
// and the loss conventions (ignore_index, label smoothing) are those of autograd/softmax.h.
#pragma once

#include <cstdint>

#include "autograd/softmax.h"
#include "core/tensor.h"

namespace define {

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

}  // namespace define
