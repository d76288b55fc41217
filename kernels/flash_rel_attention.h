// Fused relative-position attention family (Transformer-XL): the op of kernels/rel_attention.h
// computed FlashAttention-style, in one pass over key / value tiles with an online softmax, with no
// [B, H, Tq, Tk] tensor in memory. The differentiable op is autograd/flash_rel_attention.h; the
// unfused op it equals (to float tolerance, dropout mask included) is kernels/rel_attention.h.
//
// For q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv], r [H, Tk, d], u, w [H, d], M = Tk - Tq,
// query i, key j, distance dist = i + M - j and position p = Tk - 1 - dist = j + Tq - 1 - i:
//   s_ij = scale * (q_i . k_j + u . k_j + q_i . r_p + w . r_p)   (= scale * ((q_i+u).k_j + (q_i+w).r_p))
// over the visible keys (0 <= dist, and dist < window when window > 0); P = softmax of each row;
// D = dropout(P); out = D v; lse = the row's log-sum-exp of s over its visible keys, [B, H, Tq].
// The shifted position scores are a second product inside each tile: the keys j0 .. j0+K-1 of a
// tile of queries i0 .. i0+R-1 meet the positions of one band of R + K - 1 consecutive rows of r.
//
// Backward, for dO = dL/d out: delta_i = rowsum(dO_i * out_i) (why it is the softmax's rowsum of
// P * dP even with dropout: kernels/flash_attention.h); dP = (dO v^T) * z; dS = scale * P (dP - delta)
//   dqu_i = sum_j dS_ij k_j          (the content part of dq; du = sum over b, i of dqu)
//   dqw_i = sum_j dS_ij r_p(i,j)     (the position part of dq; dw = sum over b, i of dqw)
//   dq = dqu + dqw,  dk_j = sum_i dS_ij (q_i + u),  dv_j = sum_i D_ij dO_i,
//   dr_p = sum_b sum_i dS_i,j(i,p) (q_i + w)     (j = p - (Tq - 1) + i: a diagonal of the scores)
//
// Dropout: the Philox contract of kernels/dropout.h on the logical [B, H, Tq, Tk] probability
// tensor, as the unfused family draws it, so both give the same mask for the same seed and offset.
// Every row has a visible key (j = i + M), so only infinite inputs make a row without one; it gets
// zeros in out, lse = -inf and no gradient.
//
// dtypes: float32 and float64 (lse in the same dtype); 16-bit inputs are widened (exactly) and out
// rounded once to their dtype, lse then float32.
//
// Backends: kernels/ref/flash_rel_attention.cpp (the oracle: the definition in double, row by row),
// kernels/cpu/flash_rel_attention.cpp (the CPU's unfused relative attention plus a log-sum-exp
// pass), kernels/cuda/flash_rel_attention.cu (the fused tiled FFMA kernels: float32, head dims
// d, dv <= kFlashAttentionMaxHeadDim). Tests: tests/ops/flash_rel_attention_test.cpp,
// tests/cuda/flash_rel_attention_kernels_test.cpp.
#pragma once

#include "core/tensor.h"
#include "kernels/flash_attention.h"
#include "kernels/rel_attention.h"

namespace define::kernels {

// q, k, v, r, u, w: one float dtype and device, any strides (shapes as above; the entry point checks
// them as rel_attention_forward does and throws naming the operands).
FlashAttentionOutput flash_rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                                 const Tensor& u, const Tensor& w, const RelAttentionParams& params);

// The gradients asked for by `needs`, for upstream grad_out [B, H, Tq, dv], from the forward's out and
// lse and the same params.
RelAttentionGrads flash_rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const Tensor& r, const Tensor& u, const Tensor& w,
                                               const Tensor& out, const Tensor& lse, const RelAttentionParams& params,
                                               const RelAttentionNeeds& needs);

}  // namespace define::kernels
