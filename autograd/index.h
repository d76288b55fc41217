// Indexing, joining and splitting, differentiable. Backward formulas sit next to each forward
// in index.cpp. Index tensors (int32/int64) are never differentiable. All ops follow PyTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define {

// Joins tensors of one dtype and device whose shapes agree except along dim.
Tensor concat(const std::vector<Tensor>& ts, std::int64_t dim);
// Joins equally shaped tensors along a new dim (dim may be 0..ndim, or negative).
Tensor stack(const std::vector<Tensor>& ts, std::int64_t dim);
// Pieces of x along dim with the given sizes (summing to x.size(dim)). The pieces are views of
// x (no copy); their gradients are joined back together in one backward step.
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim);
// `chunks` pieces of size ceil(n / chunks), the last one smaller; fewer pieces when n is small
// (torch.chunk rules; n == 0 gives `chunks` empty pieces).
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim);

// out[p] = x[p with p[dim] = index[p]]; index has x's rank and no larger size outside dim.
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
// x with dim restricted to the entries of the 1-d index (repeats allowed).
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
// out = x.clone(); out[p with p[dim] = index[p]] += src[p] for every p in index's shape.
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace define
