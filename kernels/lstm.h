// LSTM family: one fused LSTM layer over a whole sequence, forward and backward (BPTT), with
// PyTorch's gate order (i, f, g, o) and parameter shapes, so weights interchange with torch.nn.LSTM:
//   x [T, B, I] (time-major), h0, c0 [B, H], w_ih [4H, I], w_hh [4H, H], b_ih, b_hh [4H] (optional)
//   gates_t = x_t w_ih^T + b_ih + h_{t-1} w_hh^T + b_hh        (chunks i, f, g, o of width H)
//   i, f, o = sigmoid(.), g = tanh(.);  c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t);  y_t = h_t
//
// How the work is cut:
//   forward:  the input projection x w_ih^T of all T steps is ONE GEMM into the gate buffer
//             [T, B, 4H]; then per step the recurrent product h_{t-1} w_hh^T is added into gates[t]
//             and ONE fused cell pass adds the biases, applies the activations (overwriting
//             gates[t] with the activated gates, which backward needs), and writes c_t and h_t
//             (h_t straight into y).
//   backward: per step in reverse the recurrent dh = dgates[t+1] w_hh, then ONE fused cell-backward
//             pass turns dh_t (dy_t plus that) and dc_t into the pre-activation gate gradients
//             dgates[t] and dc_{t-1}. After the loop dw_hh, dw_ih and dx are ONE GEMM each over all
//             T*B rows, and db one column sum.
// The GEMMs over all steps go through kernels::gemm (Eigen on the CPU, cuBLAS on a GPU, the tiled
// kernel on the emulated device, double loops on the reference backend). The recurrence (all T
// steps in one backend call) is kernels/ref/lstm.cpp (double loops), kernels/cpu/lstm.cpp (w_hh
// packed once per call, step GEMM and cell fused per thread's hidden units) and
// kernels/cuda/lstm.cu (per step kernels::gemm + one fused cell kernel).
// Differentiable op: autograd/lstm.h; layer: nn/lstm.h.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

// Everything the forward produces. y, h_n and c_n are the results; hs, cs and gates are what
// backward reads (hs[t] = h_{t-1} of step t, cs[t] = c_{t-1} and cs[t+1] = c_t).
struct LstmForward {
  Tensor y;         // [T, B, H]: a view of hs[1 .. T] (no copy)
  Tensor h_n, c_n;  // [B, H]: h_T and c_T, fresh tensors
  Tensor hs;        // [T+1, B, H]: h_0 .. h_T, contiguous
  Tensor cs;        // [T+1, B, H]: c_0 .. c_T, contiguous
  Tensor gates;     // [T, B, 4H]: the activated gates i, f, g, o of every step, contiguous
};

// x [T, B, I] (any strides), h0 and c0 [B, H] (any strides), w_ih [4H, I], w_hh [4H, H], b_ih and
// b_hh [4H] or undefined; one floating dtype and one device for all. T, B or I may be 0 (then y is
// empty or the input projection is zero); H must be at least 1. Throws naming the bad argument,
// e.g. "lstm_layer: w_hh [8,3] must be [4*H, H] = [12,3] for h0 [2,3]".
LstmForward lstm_forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih, const Tensor& b_hh);

// Which gradients backward computes (the others come back undefined). The recurrence runs
// whenever anything is asked for; dh0 costs one more step GEMM, dx / dw_ih / dw_hh one GEMM each.
struct LstmNeeds {
  bool x = true, h0 = true, c0 = true, w_ih = true, w_hh = true, bias = true;
};

struct LstmGrads {
  Tensor dx;            // [T, B, I]
  Tensor dh0, dc0;      // [B, H]
  Tensor dw_ih, dw_hh;  // [4H, I], [4H, H]
  Tensor dbias;         // [4H]: the gradient of b_ih and of b_hh alike (they enter as a sum)
};

// Gradients of lstm_forward for upstream gradients dy [T, B, H], dh_n and dc_n [B, H] (any strides;
// dh_n / dc_n undefined means zero). x, w_ih, w_hh are the forward's inputs (x is read only for
// dw_ih, w_ih only for dx: either may be undefined when not needed); f is the forward's result.
// Sums over steps and rows run in an order fixed by the shapes (deterministic on every backend).
LstmGrads lstm_backward(const Tensor& dy, const Tensor& dh_n, const Tensor& dc_n, const Tensor& x, const Tensor& w_ih,
                        const Tensor& w_hh, const LstmForward& f, const LstmNeeds& needs = {});

}  // namespace define::kernels
