// Reference attention row kernels: the definition of kernels/attention.h written out literally,
// one row at a time, every sum in double, one philox::random_u32 call per dropout decision.
// Called by kernels/attention.cpp with contiguous [B, H, Tq, Tk] tensors (probs may be the scores
// themselves, grad_scores may be grad_dropped itself; dropped is undefined when p == 0) and a
// padding mask that is undefined or a contiguous int32 [B, Tk] of 0/1.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset);
void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale);

}  // namespace define::kernels::ref
