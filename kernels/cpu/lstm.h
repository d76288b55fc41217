// Fast CPU LSTM recurrence: all T steps of kernels/lstm.h's layer after the input projection,
// forward and backward, with the recurrent GEMM and the cell fused per step (see lstm.cpp).
// Called by kernels/lstm.cpp with contiguous operands; same contract as kernels/ref/lstm.h:
//   forward:  gates [T, B, 4H] holds x_t w_ih^T (no biases) on entry and the activated gates
//             i, f, g, o on return; hs, cs [T+1, B, H] hold h_0, c_0 in step 0 and receive h_t, c_t
//             in step t; w_hh [4H, H]; b_ih, b_hh [4H] or undefined.
//   backward: dy [T, B, H]; dh, dc [B, H] hold dL/dh_T, dL/dc_T on entry and dL/dh_0 (when
//             need_dh0; otherwise unspecified) and dL/dc_0 on return; dgates [T, B, 4H] receives
//             the gradients of the pre-activation gates of every step.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

void lstm_forward_steps(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs,
                        const Tensor& cs, const Tensor& gates);
void lstm_backward_steps(const Tensor& dy, const Tensor& w_hh, const Tensor& hs, const Tensor& cs,
                         const Tensor& gates, const Tensor& dh, const Tensor& dc, const Tensor& dgates, bool need_dh0);

}  // namespace define::kernels::cpu
