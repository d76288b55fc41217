// Relative-position attention family (Transformer-XL): batched GEMMs around one fused row kernel,
// forward and backward (the differentiable op and the definition of the score are in
// autograd/rel_attention.h).
//
// Forward, for q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv], r [H, Tk, d], u, w [H, d],
// M = Tk - Tq:
//   qu = q + u,  qw = q + w                (broadcast over B and Tq)
//   AC = qu k^T                            (GEMM, batched over B * H)
//   BD = qw r^T                            (GEMMs batched over H, one per batch element: r is
//                                           shared by all of them)
//   P, D = fused row kernel of (AC, BD):   s_j = scale * (AC[i, j] + BD[i, Tk-1-(i+M-j)]) for the
//          visible keys j (0 <= i+M-j, and i+M-j < window when window > 0), then softmax over the
//          visible keys (the rest get 0) and dropout, in one pass over the row. The shift is an
//          index computation inside the kernel: the shifted [B, H, Tq, Tk] tensor never exists.
//   out = D v                              (GEMM)
// Backward, for dO = dL/d out:
//   dD = dO v^T                            (GEMM)
//   dS = scale * P * (dP - rowsum(dP * P)) (the attention family's fused backward row kernel,
//                                           causal over M: P is zero at every masked key)
//   dAC = dS,  dBD = unshift(dS)           (dBD[i, p] = dS[i, p + i + M - (Tk-1)] when that key
//                                           exists, else 0: the adjoint of the shift; new kernel)
//   dqu = dS k, dk = dS^T qu, dqw = dBD r, dr = sum_b dBD^T qw, dv = D^T dO   (GEMMs)
//   dq = dqu + dqw,  du = sum_{b,i} dqu,  dw = sum_{b,i} dqw
//
// Every row has a visible key (dist = 0, j = i + M), so only infinite scores make a row without
// one; such a row gets zeros, as in the attention family. Dropout follows the contract of
// kernels/dropout.h on the contiguous [B, H, Tq, Tk] probability tensor (element e kept iff
// philox::u32_to_unit_float(random_u32(seed, offset, e)) >= p), so D equals
// kernels::dropout_apply(P, p, seed, offset) bit for bit, and the backward regenerates the mask.
//
// Backends of the row kernels: kernels/ref/rel_attention.cpp (double-accumulating oracle),
// kernels/cpu/rel_attention.cpp (OpenMP over rows), kernels/cuda/rel_attention.cu (a warp per row
// up to 1024 keys, a block per row beyond). GEMMs and sums go through kernels::gemm / sum.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/attention.h"

namespace define::kernels {

struct RelAttentionParams {
  std::int64_t window = 0;  // > 0: key j is visible to query i only when i + M - j < window
  double scale = 1.0;       // finite
  double dropout = 0.0;     // p in [0, 1]; 0: no dropout
  std::uint64_t seed = 0;   // Philox stream of the dropout mask (unused when dropout == 0)
  std::uint64_t offset = 0;
};

// The fused forward row kernel on its own: P and D (AttentionProbs, D is P itself without
// dropout) from AC and BD, both [B, H, Tq, Tk] with Tk >= Tq, any strides, float32/64.
AttentionProbs rel_attention_softmax(const Tensor& ac, const Tensor& bd, const RelAttentionParams& params);

// The unshift of the backward pass on its own: dBD [B, H, Tq, Tk] (contiguous) from dS.
Tensor rel_attention_unshift(const Tensor& grad_scores);

struct RelAttentionOutput {
  Tensor out;    // [B, H, Tq, dv] contiguous
  Tensor probs;  // P (pre-dropout), what the backward pass needs; undefined unless keep_probs
};

// The whole forward pass. All inputs of one float dtype and device, any strides; the entry point
// checks the shapes above and throws naming the operands.
RelAttentionOutput rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                         const Tensor& u, const Tensor& w, const RelAttentionParams& params,
                                         bool keep_probs);

// Which gradients the backward pass computes (the others come back undefined).
struct RelAttentionNeeds {
  bool q = true, k = true, v = true, r = true, u = true, w = true;
};

struct RelAttentionGrads {
  Tensor grad_q, grad_k, grad_v, grad_r, grad_u, grad_w;
};

// The whole backward pass for upstream gradient grad_out [B, H, Tq, dv] and the forward's P.
RelAttentionGrads rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& r, const Tensor& u, const Tensor& w, const Tensor& probs,
                                         const RelAttentionParams& params, const RelAttentionNeeds& needs);

}  // namespace define::kernels
