// Flash attention, differentiable: the same op as scaled_dot_product_attention (autograd/attention.h),
// same options, same result to float tolerance and the same dropout mask for the same generator
// state, computed without a [B, H, Tq, Tk] tensor on the GPUs (kernels/flash_attention.h: tiles of
// keys and values streamed past each query tile, an online softmax, a backward that recomputes the
// probabilities from the row log-sum-exp). On the CPU it runs the CPU's own attention.
//
//   out = dropout(softmax(scale * q k^T + mask)) v
//
// The backward saves q, k, v, out and the rows' log-sum-exp (no probabilities, no dropout mask:
// the mask is regenerated from its Philox stream). First derivatives only, like
// scaled_dot_product_attention. Gradient formulas: kernels/flash_attention.h.
#pragma once

#include "autograd/attention.h"
#include "core/tensor.h"

namespace define {

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] (one dtype, one device, any strides) ->
// [B, H, Tq, dv] contiguous. Options as for scaled_dot_product_attention (the padding mask, causal,
// scale, dropout, training, generator), and the generator advances the same way. 16-bit inputs: tensor
// cores on GPUs that have them (kernels/flash_attention.h), float32 otherwise. On cuda and emu devices:
// float32 (or 16-bit) tensors and head dims d, dv <= 128.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {});

}  // namespace define
