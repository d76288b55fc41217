// Reference adaptive-softmax kernels: the definitions of kernels/adaptive_softmax.h written out
// literally with every sum in double (max, then sum of exp(x - max)), one row at a time. The
// oracle for the fast CPU path and the CUDA kernels.
// Called by kernels/adaptive_softmax.cpp, which validates everything and hands over contiguous
// tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define::kernels::ref {

// head [N, c_0 + T], tails[i] [N_i, c_{i+1} - c_i], tail_rows[i] int64 [N_i] (a valid partition),
// target [N] int32/int64; outputs loss and head_lse [N], tail_lse[i] [N_i]. All contiguous, N >= 1.
void adaptive_softmax_forward(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& tail_rows,
                              const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                              const Tensor& loss, const Tensor& head_lse, const std::vector<Tensor>& tail_lse);
// grad_loss [N] or one element, total_weight one element; grad_head and grad_tails[i] shaped as
// head and tails[i], every element written.
void adaptive_softmax_backward(const Tensor& head, const std::vector<Tensor>& tails, const Tensor& head_lse,
                               const std::vector<Tensor>& tail_lse, const std::vector<Tensor>& tail_rows,
                               const Tensor& target, const std::vector<std::int64_t>& bounds, std::int64_t ignore_index,
                               const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_head,
                               const std::vector<Tensor>& grad_tails);
// head [N, c_0 + T], tails[i] [N, c_{i+1} - c_i]; out [N, V], head_lp [N, c_0 + T].
void adaptive_log_prob(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<std::int64_t>& bounds,
                       const Tensor& out, const Tensor& head_lp);
// From out, head_lp and grad_out [N, V]: grad_tails[i] [N, c_{i+1} - c_i] and the gradient of the
// head log-probabilities grad_head_lp [N, c_0 + T] (shortlist columns copied from grad_out, cluster
// column c_0 + i = the row sum of grad_out over tail i).
void adaptive_log_prob_backward(const Tensor& out, const Tensor& head_lp, const Tensor& grad_out,
                                const std::vector<std::int64_t>& bounds, const std::vector<Tensor>& grad_tails,
                                const Tensor& grad_head_lp);

}  // namespace define::kernels::ref
