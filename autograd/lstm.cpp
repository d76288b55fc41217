// The fused LSTM layer's autograd node: the forward keeps the buffers the recurrence produced
// (h_0..h_T, c_0..c_T and the activated gates), and backward runs BPTT over them in one call.
#include "autograd/lstm.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/lstm.h"

namespace define {
namespace {

// h0 / c0 as given, or zeros [B, H] when undefined (H from w_hh, B from x).
Tensor state_or_zeros(const Tensor& s, const Tensor& x, const Tensor& w_hh) {
  if (s.defined()) return s;
  if (!x.defined() || !w_hh.defined() || x.dim() != 3 || w_hh.dim() != 2)
    fail("lstm_layer", "a zero initial state needs x [T, B, I] and w_hh [4H, H]");
  return zeros({x.shape()[1], w_hh.shape()[1]}, {x.dtype(), x.device()});
}

}  // namespace

LstmLayerResult lstm_layer(const Tensor& x_in, const Tensor& h0_in, const Tensor& c0_in, const Tensor& w_ih_in,
                           const Tensor& w_hh_in, const Tensor& b_ih_in, const Tensor& b_hh_in) {
  const Tensor x = autocast::gemm_input(x_in);
  const Tensor w_ih = autocast::gemm_input(w_ih_in);
  const Tensor w_hh = autocast::gemm_input(w_hh_in);
  const Tensor b_ih = autocast::gemm_input(b_ih_in);
  const Tensor b_hh = autocast::gemm_input(b_hh_in);
  const Tensor h0 = state_or_zeros(h0_in, x, w_hh), c0 = state_or_zeros(c0_in, x, w_hh);
  kernels::LstmForward f = kernels::lstm_forward(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
  LstmLayerResult r{f.y, f.h_n, f.c_n};
  // Inputs in this order: x, h0, c0, w_ih, w_hh, b_ih, b_hh (an undefined h0 / c0 stays undefined
  // here, so it gets no gradient).
  if (needs_grad({x, h0_in, c0_in, w_ih, w_hh, b_ih, b_hh})) {
    // dL/dx needs w_ih, dL/dw_ih needs x: keep each only when its partner needs a gradient. The
    // buffers are saved through SavedTensor, so modifying the output y (a view of hs) in place
    // before backward is reported instead of giving wrong gradients.
    record("lstm_layer", {x, h0_in, c0_in, w_ih, w_hh, b_ih, b_hh}, {r.output, r.h_n, r.c_n},
           [keep_x = SavedTensor(w_ih.requires_grad() ? x : Tensor()),
            keep_w_ih = SavedTensor(x.requires_grad() ? w_ih : Tensor()), keep_w_hh = SavedTensor(w_hh),
            keep_hs = SavedTensor(f.hs), keep_cs = SavedTensor(f.cs),
            keep_gates = SavedTensor(f.gates)](const BackwardArgs& a) {
             const char* op = "lstm_layer";
             kernels::LstmForward saved;
             saved.hs = keep_hs.get(op);
             saved.cs = keep_cs.get(op);
             saved.gates = keep_gates.get(op);
             const kernels::LstmNeeds needs{a.needs(0), a.needs(1), a.needs(2), a.needs(3), a.needs(4),
                                            a.needs(5) || a.needs(6)};
             kernels::LstmGrads g = kernels::lstm_backward(a.grad(0), a.grad(1), a.grad(2), keep_x.get(op),
                                                           keep_w_ih.get(op), keep_w_hh.get(op), saved, needs);
             // b_ih and b_hh enter as a sum: the same gradient, in separate tensors (a gradient
             // accumulated in place into one must not change the other).
             Tensor db_ih = a.needs(5) ? g.dbias : Tensor();
             Tensor db_hh = a.needs(6) ? g.dbias : Tensor();
             if (a.needs(5) && a.needs(6)) {
               db_hh = empty_like(g.dbias);
               kernels::copy_into(db_hh, g.dbias);
             }
             return std::vector<Tensor>{g.dx, g.dh0, g.dc0, g.dw_ih, g.dw_hh, db_ih, db_hh};
           });
  }
  return r;
}

}  // namespace define
