// Reference relative-attention row kernels: the definition of kernels/rel_attention.h written out
// literally, one row at a time, every sum in double, one philox::random_u32 call per dropout
// decision. Called by kernels/rel_attention.cpp with contiguous [B, H, Tq, Tk] tensors (probs may
// be ac itself; dropped is undefined when p == 0).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

// P (and D) of the scores s_j = scale * (ac[i, j] + bd[i, Tk-1-(i+M-j)]) over the visible keys.
void rel_attention_softmax(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                           std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset);
// grad_bd[i, p] = grad_scores[i, p + i + M - (Tk-1)] where that key exists, else 0.
void rel_attention_unshift(const Tensor& grad_scores, const Tensor& grad_bd);

}  // namespace define::kernels::ref
