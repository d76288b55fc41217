// The fused LSTM layer, differentiable: one autograd node for a whole sequence (kernels/lstm.h has
// the formulas and how the work is cut into GEMMs and fused cell kernels). PyTorch's gate order
// (i, f, g, o) and parameter shapes, so weights interchange with torch.nn.LSTM.
#pragma once

#include "core/tensor.h"

namespace define {

struct LstmLayerResult {
  Tensor output;  // [T, B, H]: h_1 .. h_T
  Tensor h_n;     // [B, H]: h_T (h0 when T = 0)
  Tensor c_n;     // [B, H]: c_T
};

// x [T, B, I] (time-major), h0 and c0 [B, H] (undefined: zeros), w_ih [4H, I], w_hh [4H, H],
// b_ih and b_hh [4H] (undefined: no bias). Gradients reach every input that requires one, from all
// three results (a loss on h_n or c_n included). Throws "lstm_layer: ..." naming a bad argument.
LstmLayerResult lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                           const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

}  // namespace define
