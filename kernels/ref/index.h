// Reference indexing kernels: one element at a time by coordinates, sums in double. The entry
// points (kernels/index.h) have normalised dim, checked shapes and every index, and allocated
// contiguous outputs (pre-filled with x for scatter_add and index_add, which add into out).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

void gather(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim);
void scatter_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim);
void index_select(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim);
void index_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim);

}  // namespace define::kernels::ref
