// Shapes and strides: small helpers shared by every layer (broadcasting, contiguity, printing).
// Strides are in elements, not bytes. A dimension of size 1 may carry any stride.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace define {

using Shape = std::vector<std::int64_t>;
using Strides = std::vector<std::int64_t>;

std::int64_t numel_of(const Shape& s);
Strides contiguous_strides(const Shape& s);
bool is_contiguous(const Shape& s, const Strides& st);
std::string shape_str(const Shape& s);  // "[2,3]"

// Wraps a possibly negative dim into [0, ndim); throws "<op>: dim d out of range for N-d tensor".
int normalize_dim(std::int64_t dim, std::int64_t ndim, const char* op);

// Broadcast two shapes numpy-style; throws "<op>: shapes [..] and [..] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read a tensor of shape `from` as if it had the broadcast shape `to`
// (stride 0 on expanded dimensions).
Strides broadcast_strides(const Shape& from, const Strides& from_strides, const Shape& to);

// Resolves one -1 in a reshape target and checks the element count.
Shape infer_reshape(const Shape& from, const Shape& to, const char* op);

// Strides for viewing (shape, strides) as `to` without a copy, or empty when impossible.
// Follows the rule that a view exists when each run of merged/split dims is contiguous.
bool compute_view_strides(const Shape& from, const Strides& from_strides, const Shape& to,
                          Strides& out);

}  // namespace define
