// Embedding lookup, differentiable with respect to the table. Backward in embedding.cpp.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define {

// weight [V, D], indices int32/int64 of any shape -> [indices..., D], row indices[p] at p.
// Row padding_idx (when >= 0) gets no gradient; a negative padding_idx means none.
// Indices are not differentiable. Throws "embedding: index 12 out of range for 10 rows".
Tensor embedding(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx = -1);

}  // namespace define
