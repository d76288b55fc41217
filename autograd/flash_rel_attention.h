// Relative-position attention, fused, differentiable: the same op as relative_attention
// (autograd/rel_attention.h), same options, same result to float tolerance and the same dropout
// mask for the same generator state, computed without a [B, H, Tq, Tk] tensor on the GPUs
// (kernels/flash_rel_attention.h: key / value tiles streamed past each query tile with the band of
// position embeddings they meet, an online softmax, a backward that recomputes the probabilities
// from the row log-sum-exp). On the CPU it runs the CPU's own relative attention.
//
// The backward saves q, k, v, r, u, w, out and the rows' log-sum-exp (no probabilities, no dropout
// mask). First derivatives only, like relative_attention. Gradient formulas:
// kernels/flash_rel_attention.h.
#pragma once

#include "autograd/rel_attention.h"
#include "core/tensor.h"

namespace define {

// Shapes and options as for relative_attention (options.kernel is not read). On cuda and emu
// devices: float32 or 16-bit tensors and head dims d, dv <= 128. Under an autocast region the inputs
// are cast as GEMM inputs; 16-bit inputs of one dtype run on tensor cores where the device has them
// (float16 from sm_75, bfloat16 from sm_80) and d, dv <= 64, else in float32 on widened copies.
Tensor flash_relative_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                                const Tensor& w, const RelAttentionOptions& options = {});

}  // namespace define
