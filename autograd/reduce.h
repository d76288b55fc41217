// Reductions, differentiable (formulas in reduce.cpp). Float32/float64 inputs; dims may be
// negative; an empty dims list reduces over every dim.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define {

Tensor sum(const Tensor& x);  // every element -> 0-d tensor
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
// Values of the max along dim; the gradient goes to the first maximal element of each line.
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Int64 index of the first maximal element along dim. Not differentiable.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Sums a broadcast result back to `shape` (which must broadcast to x's shape): the backward of
// broadcasting. x itself when the shapes match.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace define
