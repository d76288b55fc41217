// Indexing and concatenation: gather, scatter_add, index_select (and its backward index_add),
// concat. Index tensors are int32 or int64. CPU indices are checked on the entry point, so the
// CPU implementations (kernels/ref/index.h, kernels/cpu/index.h) can trust them; device indices
// are checked by the CUDA kernels as they read them, and a bad one is thrown at the device's next
// synchronisation point (kernels/cuda/index_error.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

// Throws "<op>: index 12 out of range for <what>" for the first index (row-major order) outside
// [0, limit); e.g. what = "10 rows" or "dim 1 of size 4". CPU indices only: for device indices it
// checks the dtype and leaves the range to the kernels (the same message, raised at the next
// synchronisation point), so it never copies them to the host.
void check_index_range(const char* op, const Tensor& index, std::int64_t limit, const std::string& what);

// PyTorch semantics throughout; `dim` may be negative. index has x's rank, and index.size(d) <=
// x.size(d) for d != dim (for scatter_add also index.size(d) <= src.size(d) for every d).
// out[p] = x[p with p[dim] = index[p]]; out has index's shape.
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
// A copy of x with out[p with p[dim] = index[p]] += src[p] for every p in index's shape.
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
// index 1-d: out = x with dim replaced by index's entries (out.size(dim) = index.numel()).
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
// A copy of x with x[.., index[j], ..] += src[.., j, ..] along dim (index_select's backward).
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);

// Tensors of one dtype and device, shapes equal except along dim, joined along dim.
// op names the caller in errors (concat, stack).
Tensor concat(const std::vector<Tensor>& ts, std::int64_t dim, const char* op = "concat");

}  // namespace define::kernels
