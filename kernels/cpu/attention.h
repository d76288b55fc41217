// Fast CPU attention row kernels: OpenMP over the rows of the [B*H*Tq, Tk] score matrix, each row
// in a few vectorisable passes (masked copy, max, exp + sum, normalise + dropout), the dropout
// words of a row computed lane-wise in groups of Philox blocks. Bit-identical dropout masks to the
// reference; values within rounding of it. Called by kernels/attention.cpp with the same
// arguments as the reference (kernels/ref/attention.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset);
void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale);

}  // namespace define::kernels::cpu
