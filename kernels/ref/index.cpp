// Reference indexing kernels: walk the coordinates of the indexed shape in row-major order and
// compute every offset from strides, so any layout works. Additions go through a double buffer.
#include "kernels/ref/index.h"

#include <vector>

namespace define::kernels::ref {
namespace {

using Coord = std::vector<std::int64_t>;

template <typename F>
void for_each_coord(const Shape& shape, F&& f) {
  const std::int64_t n = numel_of(shape);
  Coord c(shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    f(c);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
}

std::int64_t offset_of(const Coord& c, const Strides& st) {
  std::int64_t off = 0;
  for (std::size_t d = 0; d < c.size(); ++d) off += c[d] * st[d];
  return off;
}

// Offset of coordinate c with c[dim] replaced by v.
std::int64_t offset_at(const Coord& c, const Strides& st, std::int64_t dim, std::int64_t v) {
  return offset_of(c, st) + (v - c[dim]) * st[dim];
}

// Runs body.template operator()<T, I>() for x's dtype T and index's dtype I.
template <typename Body>
void dispatch(const char* op, DType value_dtype, DType index_dtype, Body&& body) {
  DEFINE_DISPATCH_ALL(value_dtype, op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(index_dtype, op, [&] { body.template operator()<T, scalar_t>(); });
  });
}

// out (contiguous) += contributions, summed in double and rounded once at the end.
template <typename T, typename Visit>
void accumulate(const Tensor& out, Visit&& visit) {
  T* po = out.data<T>();
  std::vector<double> acc(static_cast<std::size_t>(out.numel()));
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<double>(po[i]);
  visit(acc);
  for (std::size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<T>(acc[i]);
}

}  // namespace

void gather(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  dispatch("gather", x.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* px = x.data<T>();
    const I* pi = index.data<I>();
    T* po = out.data<T>();
    for_each_coord(index.shape(), [&](const Coord& c) {
      const auto v = static_cast<std::int64_t>(pi[offset_of(c, index.strides())]);
      po[offset_of(c, out.strides())] = px[offset_at(c, x.strides(), dim, v)];
    });
  });
}

void scatter_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  dispatch("scatter_add", out.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* ps = src.data<T>();
    const I* pi = index.data<I>();
    accumulate<T>(out, [&](std::vector<double>& acc) {
      for_each_coord(index.shape(), [&](const Coord& c) {
        const auto v = static_cast<std::int64_t>(pi[offset_of(c, index.strides())]);
        acc[static_cast<std::size_t>(offset_at(c, out.strides(), dim, v))] +=
            static_cast<double>(ps[offset_of(c, src.strides())]);
      });
    });
  });
}

void index_select(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  dispatch("index_select", x.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* px = x.data<T>();
    const I* pi = index.data<I>();
    T* po = out.data<T>();
    for_each_coord(out.shape(), [&](const Coord& c) {
      const auto v = static_cast<std::int64_t>(pi[c[dim] * index.strides()[0]]);
      po[offset_of(c, out.strides())] = px[offset_at(c, x.strides(), dim, v)];
    });
  });
}

void index_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  dispatch("index_add", out.dtype(), index.dtype(), [&]<typename T, typename I>() {
    const T* ps = src.data<T>();
    const I* pi = index.data<I>();
    accumulate<T>(out, [&](std::vector<double>& acc) {
      for_each_coord(src.shape(), [&](const Coord& c) {
        const auto v = static_cast<std::int64_t>(pi[c[dim] * index.strides()[0]]);
        acc[static_cast<std::size_t>(offset_at(c, out.strides(), dim, v))] +=
            static_cast<double>(ps[offset_of(c, src.strides())]);
      });
    });
  });
}

}  // namespace define::kernels::ref
