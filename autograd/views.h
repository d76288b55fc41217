// Views and copies, differentiable. A view shares storage with its input (no data is copied);
// its backward maps the gradient back onto the input's shape. reshape() copies only when the
// strides make a view impossible; view() refuses in that case.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define {

Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
// Elements [start, start + length) along dim.
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
// The slice at `index` along dim, with that dim removed.
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);
// Broadcast to `shape` (size-1 dims stretched with stride 0; -1 keeps a size).
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x);  // all size-1 dims
Tensor squeeze(const Tensor& x, std::int64_t dim);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);

Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);       // always a fresh contiguous copy
Tensor to_device(const Tensor& x, Device device);
Tensor to_dtype(const Tensor& x, DType dtype);

// dst <- src (src broadcast to dst and cast to its dtype). In place, not recorded: refused for a
// tensor that requires grad while grad mode is on. Bumps dst's version counter.
void copy_(const Tensor& dst, const Tensor& src);

// Throws "<op>: in-place operation on a tensor that requires grad ..." when that applies.
void check_inplace_allowed(const char* op, const Tensor& t);

}  // namespace define
