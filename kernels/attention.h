// Attention family: scaled dot-product attention as two batched GEMMs around one fused row kernel,
// forward and backward (the differentiable op is autograd/attention.h).
//
// Forward, for q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv]:
//   S = scale * q k^T                      (GEMM, the scale as its alpha)
//   P = masked softmax of each row of S    (fused row kernel: padding mask + causal mask +
//   D = dropout(P)                          softmax + dropout in one pass over the row)
//   out = D v                              (GEMM)
// Backward, for dO = dL/d out:
//   dD = dO v^T                            (GEMM)
//   dS = scale * P * (dP - rowsum(dP * P)), dP = dD * keep / (1 - p)
//                                          (fused row kernel; it also rebuilds D from P)
//   dv = D^T dO,  dq = dS k,  dk = dS^T q  (GEMMs)
//
// Masks. Key j of row (b, h, i) is valid unless key_padding_mask[b, j] is nonzero, or causal and
// j > i + (Tk - Tq). Invalid keys get probability exactly 0; a row without a valid key (or whose
// valid scores are all -inf, which only infinite inputs produce) is all zeros, not NaN, and passes
// no gradient. Masks are read per row, never expanded to [B, H, Tq, Tk]; the padding mask is
// turned into int32 0/1 on the scores' device first (one [B, Tk] tensor).
//
// Dropout follows the contract of kernels/dropout.h on the contiguous [B, H, Tq, Tk] probability
// tensor: element e (row-major) is kept iff philox::u32_to_unit_float(random_u32(seed, offset, e))
// >= p, and a kept element is P_e * dropout_scale<T>(p) rounded to T. So D equals
// kernels::dropout_apply(P, p, seed, offset) bit for bit, on every backend, and the backward pass
// regenerates the mask instead of storing it.
//
// Backends of the row kernels: kernels/ref/attention.cpp (double-accumulating oracle),
// kernels/cpu/attention.cpp (OpenMP over rows), kernels/cuda/attention.cu (one warp per row up to
// 1024 keys, one block per row beyond). The GEMMs go through kernels::gemm (Eigen / cuBLAS / tiles).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

// How the rows of a score tensor [B, H, Tq, Tk] are masked and dropped.
struct AttentionMasking {
  Tensor key_padding_mask{};  // undefined, or [B, Tk] of any dtype: nonzero = padded key
  bool causal = false;      // key j is masked for query i when j > i + (Tk - Tq)
  double dropout = 0.0;     // p in [0, 1]; 0: no dropout
  std::uint64_t seed = 0;   // Philox stream of the dropout mask (unused when dropout == 0)
  std::uint64_t offset = 0;
};

// Probabilities P and their dropped-out form D (D is P itself when dropout == 0).
struct AttentionProbs {
  Tensor probs;    // [B, H, Tq, Tk] contiguous
  Tensor dropped;  // [B, H, Tq, Tk] contiguous
};

// The fused row kernel on its own: P and D of scores [B, H, Tq, Tk] (any strides, float32/64).
// Throws naming the mask when its shape is not [B, Tk].
AttentionProbs attention_softmax(const Tensor& scores, const AttentionMasking& masking);

struct AttentionSoftmaxGrad {
  Tensor grad_scores;  // scale * P * (dP - rowsum(dP * P)), contiguous
  Tensor dropped;      // D, rebuilt from P (P itself when dropout == 0)
};

// The fused backward row kernel: from P (as attention_softmax returned it) and dD = dL/dD, the
// gradient with respect to the unscaled scores q k^T (scale folded in) and D. Only
// masking.causal, dropout, seed and offset are used (masked entries of P are already zero).
AttentionSoftmaxGrad attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped,
                                                const AttentionMasking& masking, double scale);

struct AttentionOutput {
  Tensor out;    // [B, H, Tq, dv] contiguous
  Tensor probs;  // P (pre-dropout), what the backward pass needs; undefined unless keep_probs
};

// The whole forward pass. q, k, v: one float dtype and device, any strides (shapes as above;
// the entry point checks them and throws naming the operands). scale must be finite.
AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMasking& masking,
                                  double scale, bool keep_probs);

struct AttentionGrads {
  Tensor grad_q, grad_k, grad_v;  // undefined where not asked for
};

// The whole backward pass for upstream gradient grad_out [B, H, Tq, dv] and the forward's P.
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionMasking& masking, double scale, bool need_q,
                                  bool need_k, bool need_v);

}  // namespace define::kernels
