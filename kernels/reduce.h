// Reduction family: sum/mean over any set of dims, the sum of squares, sum_to (the reduction that
// undoes broadcasting), max/argmax along one dim and max's backward.
//
// The entry points validate, normalise the dims and allocate outputs "keepdim-shaped" (the
// input's rank, size 1 on reduced dims); the implementations in kernels/ref/reduce.h and
// kernels/cpu/reduce.h read which dims to reduce off the shapes: a dim is reduced where the
// output has size 1 and the input does not. Results drop the reduced dims unless keepdim.
// Float32/float64 only. The differentiable API is autograd/reduce.h.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

// Sum over `dims` (negative dims allowed; an empty list means every dim).
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim);
// Sum divided by the number of elements reduced.
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim);
// The sum of x's squared elements as a 0-d tensor of x's dtype (0 for an empty x): what
// sum(x * x) gives, in one read of x and without the temporary.
Tensor sum_of_squares(const Tensor& x);
// Sums x over the dims it was broadcast along so that the result has `shape` (which must
// broadcast to x's shape). Returns x itself when the shapes already match.
Tensor sum_to(const Tensor& x, const Shape& shape);
// x broadcast to `shape` as a fresh contiguous tensor (sum_to's adjoint).
Tensor broadcast_to(const Tensor& x, const Shape& shape);

// Max along dim: values (x's dtype) and int64 indices of the first maximal element
// (NaN counts as the maximum, the first NaN wins).
std::pair<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim);
// Gradient of max's values: zeros of `input_shape` with grad[p] added at p[dim] = indices[p].
// grad and indices have max's output shape (with or without the kept dim, as `keepdim` says).
Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, std::int64_t dim,
                    bool keepdim);

}  // namespace define::kernels
