// Embedding family: row lookup out[p] = weight[indices[p]] and its deterministic backward.
// Implementations: kernels/ref/embedding.h (double-accumulating loops), kernels/cpu/embedding.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

// weight [V, D] (float), indices int32/int64 of any shape -> [indices..., D].
// Throws "embedding: index 12 out of range for 10 rows".
Tensor embedding(const Tensor& weight, const Tensor& indices);

// Gradient of embedding for weight: grad_weight[v] = sum of grad_out[p] over positions p with
// indices[p] == v, summed in increasing p (deterministic, no atomics); row padding_idx (when
// >= 0) stays zero. grad_out has shape [indices..., D].
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, std::int64_t num_rows,
                          std::int64_t padding_idx);

// The same gradient added into an existing grad_weight [num_rows, D] (contiguous, grad_out's
// dtype and device) in place: each named row gets its terms one by one in increasing position
// order; other rows, and row padding_idx, keep their values. What a tied table's backward uses
// when the output layer's dense gradient for it is already there (autograd/embedding.cpp).
void embedding_backward_into(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                             std::int64_t padding_idx);

}  // namespace define::kernels
