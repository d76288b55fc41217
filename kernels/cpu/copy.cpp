// Fast CPU copy kernels: contiguous same-dtype copies are memcpy; contiguous casts and
// accumulations are flat OpenMP loops the compiler vectorises, as are copies into a contiguous
// tensor from a source whose rows are contiguous (broadcasts, slabs); everything else takes the
// strided loop (views are usually small or are made contiguous once and reused).
#include <cstring>

#include "kernels/cpu/copy.h"
#include "kernels/strided_loop.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;

bool flat(const Tensor& dst, const Tensor& src) {
  return dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape();
}

template <typename D, typename S, typename Op>
void loop(const Tensor& dst, const Tensor& src, Op op) {
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src.raw_data());
  const std::int64_t n = dst.numel();
  if (flat(dst, src)) {
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = op(d[i], s[i]);
    return;
  }
  if (src.numel() == 1) {
    const S v = *s;
    if (dst.is_contiguous()) {
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
      for (std::int64_t i = 0; i < n; ++i) d[i] = op(d[i], v);
      return;
    }
  }
  const Strides sb = broadcast_strides(src.shape(), src.strides(), dst.shape());
  const Shape& shape = dst.shape();
  const int nd = dst.dim();
  if (dst.is_contiguous() && nd >= 1 && sb[nd - 1] == 1) {
    // Rows contiguous on both sides (a bias broadcast over a layer's output rows, a slab of a
    // larger tensor): one vectorised loop a row, rows shared out over the threads. The element-
    // by-element strided loop below ran a Linear's bias fill over the 33,278-word WikiText-2 output
    // (23 M elements a step) at a quarter of memory speed.
    const std::int64_t inner = shape[nd - 1], rows = n / inner;
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t rest = r, offset = 0;
      for (int k = nd - 2; k >= 0; --k) {
        offset += (rest % shape[k]) * sb[k];
        rest /= shape[k];
      }
      D* drow = d + r * inner;
      const S* srow = s + offset;
      for (std::int64_t i = 0; i < inner; ++i) drow[i] = op(drow[i], srow[i]);
    }
    return;
  }
  strided_loop2(shape, dst.strides(), sb, [&](std::int64_t od, std::int64_t os) { d[od] = op(d[od], s[os]); });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && flat(dst, src)) {
    std::memcpy(dst.raw_data(), src.raw_data(), static_cast<std::size_t>(dst.numel()) * dtype_size(dst.dtype()));
    return;
  }
  DEFINE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using D = scalar_t;
    DEFINE_DISPATCH_ALL(src.dtype(), "copy", [&] {
      using S = scalar_t;
      loop<D, S>(dst, src, [](D, S s) { return static_cast<D>(s); });
    });
  });
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  DEFINE_DISPATCH_ALL(dst.dtype(), "accumulate", [&] {
    loop<scalar_t, scalar_t>(dst, src, [](scalar_t d, scalar_t s) { return add_stored(d, s); });
  });
}

template <typename T>
void fill_typed(const Tensor& dst, T v) {
  T* d = dst.data<T>();
  const std::int64_t n = dst.numel();
  if (dst.is_contiguous()) {
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = v;
  } else {
    strided_loop2(dst.shape(), dst.strides(), dst.strides(), [&](std::int64_t o, std::int64_t) { d[o] = v; });
  }
}

void fill(const Tensor& dst, double value) {
  DEFINE_DISPATCH_ALL(dst.dtype(), "fill", [&] { fill_typed(dst, static_cast<scalar_t>(value)); });
}

}  // namespace define::kernels::cpu
