// Fast CPU indexing kernels. Inputs are made contiguous and seen as [outer, size along dim,
// inner], which turns every op into row copies or row additions. The adding ops (scatter_add,
// index_add) split work by (outer, inner range) only: all additions into one output element then
// happen on one thread, in index order, so results are deterministic without atomics.
// gather/scatter_add with an index smaller than x outside dim (rare) use the reference kernels.
#include "kernels/cpu/index.h"

#include <algorithm>

#include "kernels/copy.h"
#include "kernels/ref/index.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;
constexpr std::int64_t kInnerChunk = 256;  // inner elements per task of the adding ops

// A contiguous tensor seen as [outer, mid, inner] around dim.
struct Split3 {
  std::int64_t outer = 1, mid = 1, inner = 1;
};
Split3 split_at(const Shape& shape, std::int64_t dim) {
  Split3 s;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[d];
    else if (d == dim) s.mid = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// Shapes equal except along dim.
bool same_except(const Shape& a, const Shape& b, std::int64_t dim) {
  if (a.size() != b.size()) return false;
  for (std::size_t d = 0; d < a.size(); ++d)
    if (static_cast<std::int64_t>(d) != dim && a[d] != b[d]) return false;
  return true;
}

template <typename Body>
void dispatch(const char* op, DType value_dtype, DType index_dtype, Body&& body) {
  DEFINE_DISPATCH_ALL(value_dtype, op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(index_dtype, op, [&] { body.template operator()<T, scalar_t>(); });
  });
}

// out[o, idx(o, j, i), i] += src[o, j, i] for j in order, parallel over (o, inner chunk).
// idx(o, j, i) gives the target row along dim.
template <typename T, typename IndexOf>
void add_rows(T* out, const T* src, const Split3& o_shape, std::int64_t n, IndexOf idx) {
  const std::int64_t chunks = (o_shape.inner + kInnerChunk - 1) / kInnerChunk;
  const std::int64_t tasks = o_shape.outer * chunks;
  const std::int64_t work = o_shape.outer * n * o_shape.inner;
#pragma omp parallel for if (work > kParallelGrain && tasks > 1) schedule(static)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t o = t / chunks, i0 = (t % chunks) * kInnerChunk;
    const std::int64_t i1 = std::min(o_shape.inner, i0 + kInnerChunk);
    for (std::int64_t j = 0; j < n; ++j) {
      const T* s = src + (o * n + j) * o_shape.inner;
      for (std::int64_t i = i0; i < i1; ++i) {
        T& dst = out[(o * o_shape.mid + idx(o, j, i)) * o_shape.inner + i];
        dst = add_stored(dst, s[i]);
      }
    }
  }
}

}  // namespace

void gather(const Tensor& x_in, const Tensor& index_in, const Tensor& out, std::int64_t dim) {
  if (!same_except(index_in.shape(), x_in.shape(), dim)) return ref::gather(x_in, index_in, out, dim);
  const Tensor x = kernels::contiguous(x_in), index = kernels::contiguous(index_in);
  const Split3 xs = split_at(x.shape(), dim);
  const std::int64_t n = index.shape()[dim], rows = xs.outer * n, inner = xs.inner;
  dispatch("gather", x.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* px = x.data<T>();
    const I* pi = index.data<I>();
    T* po = out.data<T>();
#pragma omp parallel for if (rows * inner > kParallelGrain) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xrow = px + (r / n) * xs.mid * inner;  // x[o, 0, 0]
      for (std::int64_t i = 0; i < inner; ++i)
        po[r * inner + i] = xrow[static_cast<std::int64_t>(pi[r * inner + i]) * inner + i];
    }
  });
}

void scatter_add(const Tensor& index_in, const Tensor& src_in, const Tensor& out, std::int64_t dim) {
  if (index_in.shape() != src_in.shape() || !same_except(index_in.shape(), out.shape(), dim))
    return ref::scatter_add(index_in, src_in, out, dim);
  const Tensor index = kernels::contiguous(index_in), src = kernels::contiguous(src_in);
  const Split3 os = split_at(out.shape(), dim);
  const std::int64_t n = index.shape()[dim];
  dispatch("scatter_add", out.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const I* pi = index.data<I>();
    add_rows(out.data<T>(), src.data<T>(), os, n, [&](std::int64_t o, std::int64_t j, std::int64_t i) {
      return static_cast<std::int64_t>(pi[(o * n + j) * os.inner + i]);
    });
  });
}

void index_select(const Tensor& x_in, const Tensor& index_in, const Tensor& out, std::int64_t dim) {
  const Tensor x = kernels::contiguous(x_in), index = kernels::contiguous(index_in);
  const Split3 xs = split_at(x.shape(), dim);
  const std::int64_t n = index.numel(), rows = xs.outer * n, inner = xs.inner;
  dispatch("index_select", x.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* px = x.data<T>();
    const I* pi = index.data<I>();
    T* po = out.data<T>();
#pragma omp parallel for if (rows * inner > kParallelGrain) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r / n, j = r % n;
      const T* from = px + (o * xs.mid + static_cast<std::int64_t>(pi[j])) * inner;
      std::copy(from, from + inner, po + r * inner);
    }
  });
}

void index_add(const Tensor& index_in, const Tensor& src_in, const Tensor& out, std::int64_t dim) {
  const Tensor index = kernels::contiguous(index_in), src = kernels::contiguous(src_in);
  const Split3 os = split_at(out.shape(), dim);
  dispatch("index_add", out.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const I* pi = index.data<I>();
    add_rows(out.data<T>(), src.data<T>(), os, index.numel(),
             [&](std::int64_t, std::int64_t j, std::int64_t) { return static_cast<std::int64_t>(pi[j]); });
  });
}

}  // namespace define::kernels::cpu
