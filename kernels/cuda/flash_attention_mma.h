// The tensor-core forward and backward of the flash-attention family (kernels/cuda/flash_attention_mma.cu), for
// kernels/cuda/flash_attention.cu to try first on 16-bit inputs.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

// The forward of kernels/contracts/flash_attention.inc on tensor cores, when it applies: q, k, v of
// one 16-bit dtype (out of it, lse float32) on a device that has the instruction (float16: sm_75,
// bfloat16: sm_80) and head dims up to 128. Returns false, having done nothing, when it does not.
bool flash_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& key_padding, bool causal, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale);

// Its backward on tensor cores, when the same holds (and grad_out, out and the defined gradients
// share the inputs' dtype); returns false, having done nothing, when not.
bool flash_attention_backward_mma(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k,
                                  const Tensor& grad_v, const Tensor& key_padding, bool causal, double p,
                                  std::uint64_t seed, std::uint64_t offset, double scale);

}  // namespace define::kernels::DEFINE_CUDA_NS
