// What the relative-attention families share (kernels/rel_attention.cpp, the unfused one, defines
// it): the argument checks, so the unfused and the fused family refuse the same inputs with the same
// words (kernels/flash_rel_attention.cpp), and the views and batched GEMMs that the unfused path and
// the CPU backend of the fused one (kernels/cpu/flash_rel_attention.cpp) build their products from, and
// the sums that turn dq's two parts into dq, du and dw.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/rel_attention.h"

namespace define::kernels::rel_attention_common {

// window >= 0, dropout in [0, 1], a finite scale.
void check_params(const char* op, const RelAttentionParams& p);
// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv], r [H, Tk, d], u and w [H, d], Tk >= Tq: defined,
// matching, one float dtype and device.
void check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                  const Tensor& w);

// A per-head bias [H, d] as [1, H, 1, d]: a view that broadcasts over B and Tq.
Tensor per_head_bias(const Tensor& x);
// Element b of dim 0, as a view.
Tensor batch_element(const Tensor& t, std::int64_t b);
// out[b] = op(x[b]) @ op(r) for each batch element b: the GEMMs with the position embeddings
// r [H, Tk, d], shared by every batch element (why one GEMM per b: kernels/rel_attention.cpp).
void gemm_per_batch(const Tensor& x, const Tensor& r, const Tensor& out, bool trans_x, bool trans_r);
// From dq's two parts dqu = dS k and dqw = dS' r ([B, H, Tq, d], one dtype; either may be undefined
// where nothing below needs it), the defined ones of grad_q = dqu + dqw [B, H, Tq, d], grad_u = the sum
// of dqu over b and i, grad_w = that of dqw [H, d], each rounded once to its own dtype.
void finish_query_grads(const Tensor& grad_qu, const Tensor& grad_qw, const Tensor& grad_q, const Tensor& grad_u,
                        const Tensor& grad_w);

}  // namespace define::kernels::rel_attention_common
