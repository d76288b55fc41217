// Fast CPU embedding kernels. The entry points (kernels/embedding.h) have checked every index,
// made indices contiguous ([N] values) and allocated contiguous outputs: out [N, D] for the
// lookup, grad_weight [V, D] for the backward, grad_out handed over as contiguous [N, D].
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& out);
void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight,
                        std::int64_t padding_idx);

}  // namespace define::kernels::cpu
