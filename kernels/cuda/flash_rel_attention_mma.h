// The tensor-core forward and backward of the fused relative-attention family
// (kernels/cuda/flash_rel_attention_mma.cu), for kernels/cuda/flash_rel_attention.cu to try first on
// 16-bit inputs.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

// The forward of kernels/contracts/flash_rel_attention.inc on tensor cores, when it applies: q, k, v,
// r, u, w and out of one 16-bit dtype (lse float32) on a device that has the instruction (float16:
// sm_75, bfloat16: sm_80) and head dims up to 64. Returns false, having done nothing, when it does not.
bool flash_rel_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                     const Tensor& u, const Tensor& w, const Tensor& out, const Tensor& lse,
                                     std::int64_t window, double p, std::uint64_t seed, std::uint64_t offset,
                                     double scale);

// Its backward on tensor cores, when the same holds and grad_out and the gradients share the inputs'
// dtype; returns false, having done nothing, when not.
bool flash_rel_attention_backward_mma(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& r, const Tensor& u, const Tensor& w, const Tensor& out,
                                      const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k,
                                      const Tensor& grad_v, const Tensor& grad_r, const Tensor& grad_u,
                                      const Tensor& grad_w, std::int64_t window, double p, std::uint64_t seed,
                                      std::uint64_t offset, double scale);

}  // namespace define::kernels::DEFINE_CUDA_NS
