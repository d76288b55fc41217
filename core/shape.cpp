#include "core/shape.h"

#include <fmt/format.h>

#include "core/error.h"

namespace define {

std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

bool is_contiguous(const Shape& s, const Strides& st) {
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (st[i] != acc) return false;
    acc *= s[i];
  }
  return true;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

int normalize_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  if (dim < lo || dim > hi) fail(op, "dim {} out of range for a {}-d tensor", dim, ndim);
  return static_cast<int>(dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes {} and {} cannot be broadcast", shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& from, const Strides& from_strides, const Shape& to) {
  Strides out(to.size(), 0);
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    out[lead + i] = (from[i] == 1 && to[lead + i] != 1) ? 0 : from_strides[i];
  return out;
}

Shape infer_reshape(const Shape& from, const Shape& to, const char* op) {
  Shape out = to;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) fail(op, "only one dimension can be -1 in {}", shape_str(to));
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      fail(op, "invalid size {} in {}", out[i], shape_str(to));
    } else {
      known *= out[i];
    }
  }
  const std::int64_t n = numel_of(from);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      fail(op, "cannot reshape {} ({} elements) into {}", shape_str(from), n, shape_str(to));
    out[infer] = n / known;
  } else if (known != n) {
    fail(op, "cannot reshape {} ({} elements) into {} ({} elements)", shape_str(from), n,
         shape_str(to), known);
  }
  return out;
}

bool compute_view_strides(const Shape& from, const Strides& fs, const Shape& to, Strides& out) {
  out.assign(to.size(), 0);
  if (numel_of(from) == 0) {
    out = contiguous_strides(to);
    return true;
  }
  // Walk `from` in chunks of dims that are contiguous with each other; each chunk must map onto
  // a run of `to` dims whose product equals the chunk's element count.
  std::int64_t view_d = static_cast<std::int64_t>(to.size()) - 1;
  std::int64_t chunk_base_stride = fs.empty() ? 1 : fs.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[d];
    const bool chunk_end = d == 0 || (from[d - 1] != 1 && fs[d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_end) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = fs[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace define
