// Reference LSTM recurrence: all T steps of kernels/lstm.h's layer after the input projection,
// written out per element with every value computed in double (the recurrent products
// h_{t-1} w_hh^T and dgates w_hh summed in double, exp-based sigmoid, std::tanh) and rounded once
// when stored. The oracle for the fast CPU path (kernels/cpu/lstm.cpp) and the CUDA kernels.
// Called by kernels/lstm.cpp with contiguous operands:
//   forward:  gates [T, B, 4H] (PyTorch's i, f, g, o order) holds x_t w_ih^T (no biases) on entry
//             and the activated gates on return; hs, cs [T+1, B, H] hold h_0, c_0 in step 0 and
//             receive h_t, c_t in step t (c_t = f c_{t-1} + i g, h_t = o tanh(c_t)); w_hh [4H, H];
//             b_ih, b_hh [4H] or undefined.
//   backward: dy [T, B, H]; dh, dc [B, H] hold dL/dh_T, dL/dc_T on entry and dL/dh_0 (when
//             need_dh0; otherwise unspecified) and dL/dc_0 on return; dgates [T, B, 4H] receives
//             the gradients of the pre-activation gates of every step.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

void lstm_forward_steps(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs,
                        const Tensor& cs, const Tensor& gates);
void lstm_backward_steps(const Tensor& dy, const Tensor& w_hh, const Tensor& hs, const Tensor& cs,
                         const Tensor& gates, const Tensor& dh, const Tensor& dc, const Tensor& dgates, bool need_dh0);

}  // namespace define::kernels::ref
