// Relative-position attention of Transformer-XL (Dai et al. 2019, section 3.3), differentiable:
// the attention of one layer over [memory, segment] with the two learned global biases and the
// relative shift, as one fused op (kernels/rel_attention.h: batched GEMMs around fused row
// kernels; forward and backward on the reference, CPU and CUDA backends).
//
// For query i (0-based, of Tq) and key j (of Tk = M + Tq, the first M keys being the memory),
// head h, the distance of key j from query i is dist = i + M - j, and
//
//   score(i, j) = scale * ( (q_i + u_h) . k_j            content term   ("AC" in the paper)
//                         + (q_i + w_h) . r_h[Tk-1-dist] ) position term ("BD", after the shift)
//
// where r_h[p] is the projected position embedding of distance Tk-1-p (the reference code's
// pos_seq runs Tk-1 .. 0, clamped at clamp_len by the caller). Key j is visible to query i iff
// 0 <= dist (causal over memory + segment) and, with window > 0 (same_length), dist < window.
// A row without a visible key gets zeros. Then softmax over j, dropout on the probabilities
// (the Philox contract of kernels/dropout.h on the [B, H, Tq, Tk] tensor, as scaled_dot_product_
// attention), and the value product.
#pragma once

#include <cstdint>

#include "autograd/attention.h"
#include "core/generator.h"
#include "core/tensor.h"

namespace define {

struct RelAttentionOptions {
  std::int64_t window = 0;         // same_length: each query sees at most `window` keys; 0: all
  double scale = 0.0;              // 0: 1 / sqrt(d)
  double dropout = 0.0;            // on the attention probabilities (inverted dropout)
  bool training = true;            // dropout only while training
  Generator* generator = nullptr;  // nullptr: default_generator()
  // Auto: the fused kernels of autograd/flash_rel_attention.h where they run (cuda and emu devices,
  // float32 or 16-bit inputs, head dims up to 128), else the unfused op; the process-wide default of
  // autograd/attention.h ($DEFINE_ATTENTION) decides Auto first, as for scaled_dot_product_attention.
  AttentionKernel kernel = AttentionKernel::Auto;
};

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv], r [H, Tk, d], u and w [H, d] (one float
// dtype, one device, any strides; Tk >= Tq) -> [B, H, Tq, dv] contiguous. Differentiable in
// every input. Shape mismatches throw naming the operands and their shapes.
Tensor relative_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                          const Tensor& w, const RelAttentionOptions& options = {});

}  // namespace define
