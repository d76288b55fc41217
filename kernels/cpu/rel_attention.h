// Fast CPU relative-attention row kernels: OpenMP over the rows of the [B*H*Tq, Tk] score
// matrix; each row forms its visible scores from AC and the shifted BD in one vectorisable pass,
// then max, exp + sum, normalise and dropout as the attention family's row kernel does. Dropout
// masks bit-identical to the reference, values within rounding of it. Called by
// kernels/rel_attention.cpp with the same arguments as the reference (kernels/ref/rel_attention.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

void rel_attention_softmax(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                           std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset);
void rel_attention_unshift(const Tensor& grad_scores, const Tensor& grad_bd);

}  // namespace define::kernels::cpu
