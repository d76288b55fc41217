// Fast CPU split-mix. Each row is independent (OpenMP over rows) and is assembled chunk by chunk:
// an x chunk or an unshuffled y chunk is one contiguous run (memcpy when its column stride is 1);
// a shuffled y chunk is a small transpose (unrolled for s = 2, 4, 8, 16 when the chunk covers
// whole rows of s), else a strided gather whose source index is stepped with two counters
// instead of a division per element. Backward is the same walk with source and destination swapped
// (dy is written through the shuffle; each row belongs to one thread, so no two writes meet).
// Pure copies: bit-identical to the reference.
#include "kernels/cpu/split_mix.h"

#include <cstring>
#include <type_traits>

#include "core/dtype.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements per call below which one thread is faster

struct Layout {
  std::int64_t pc, qc;  // chunk widths of x and y: p/g, q/g
  std::int64_t g, s;    // groups, shuffle groups (1: no shuffle)
  std::int64_t qs;      // width of one shuffle group of y: q/s
};

// dst[k] = src[k * src_stride], k < n.
template <typename T>
void gather_run(T* dst, const T* src, std::int64_t src_stride, std::int64_t n) {
  if (src_stride == 1) {
    if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  for (std::int64_t k = 0; k < n; ++k) dst[k] = src[k * src_stride];
}

// Shuffled position j holds y[(j mod s) * qs + j / s]; (lane, col) = (j mod s, j / s), stepped.
struct ShuffleCursor {
  std::int64_t lane, col;
  ShuffleCursor(std::int64_t j, std::int64_t s) : lane(j % s), col(j / s) {}
  std::int64_t source(std::int64_t qs) const { return lane * qs + col; }
  void next(std::int64_t s) {
    if (++lane == s) {
      lane = 0;
      ++col;
    }
  }
};

// Whole rows of the shuffle: z viewed as [q/s, s] is y viewed as [s, q/s], transposed, so a chunk
// that starts and ends on a multiple of s is the transpose of an [s, n/s] block of y (row stride
// qs, unit column stride). With S a compile-time constant the inner loop over lanes is unrolled
// and GCC vectorises the interleave (loads from S streams, permute, contiguous stores).
template <int S, typename T>
void interleave_block(T* dst, const T* y, std::int64_t qs, std::int64_t cols) {
  for (std::int64_t u = 0; u < cols; ++u)
    for (int i = 0; i < S; ++i) dst[u * S + i] = y[i * qs + u];
}
template <int S, typename T>
void deinterleave_block(T* dy, const T* src, std::int64_t qs, std::int64_t cols) {
  for (std::int64_t u = 0; u < cols; ++u)
    for (int i = 0; i < S; ++i) dy[i * qs + u] = src[u * S + i];
}

// Calls f(std::integral_constant<int, S>) for the unrolled lane counts; false for other s.
template <typename F>
bool with_unrolled_lanes(std::int64_t s, F&& f) {
  switch (s) {
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
    case 16: f(std::integral_constant<int, 16>{}); return true;
    default: return false;
  }
}

// dst[k] = z[first + k] for the shuffled row z of y (column stride ycs), k < n.
template <typename T>
void gather_shuffled(T* dst, const T* y, std::int64_t ycs, std::int64_t first, std::int64_t n, const Layout& l) {
  if (ycs == 1 && first % l.s == 0 && n % l.s == 0 &&
      with_unrolled_lanes(l.s, [&](auto lanes) { interleave_block<lanes()>(dst, y + first / l.s, l.qs, n / l.s); }))
    return;
  ShuffleCursor cur(first, l.s);
  for (std::int64_t k = 0; k < n; ++k, cur.next(l.s)) dst[k] = y[cur.source(l.qs) * ycs];
}

// dz[first + k] = src[k * src_stride] written through the shuffle into dy (contiguous), k < n.
template <typename T>
void scatter_shuffled(T* dy, const T* src, std::int64_t src_stride, std::int64_t first, std::int64_t n,
                      const Layout& l) {
  if (src_stride == 1 && first % l.s == 0 && n % l.s == 0 &&
      with_unrolled_lanes(l.s, [&](auto lanes) { deinterleave_block<lanes()>(dy + first / l.s, src, l.qs, n / l.s); }))
    return;
  ShuffleCursor cur(first, l.s);
  for (std::int64_t k = 0; k < n; ++k, cur.next(l.s)) dy[cur.source(l.qs)] = src[k * src_stride];
}

template <typename T>
void forward_row(const T* x, std::int64_t xcs, const T* y, std::int64_t ycs, T* out, const Layout& l) {
  for (std::int64_t c = 0; c < l.g; ++c) {
    gather_run(out, x + c * l.pc * xcs, xcs, l.pc);
    out += l.pc;
    if (l.s == 1) gather_run(out, y + c * l.qc * ycs, ycs, l.qc);
    else gather_shuffled(out, y, ycs, c * l.qc, l.qc, l);
    out += l.qc;
  }
}

template <typename T>
void backward_row(const T* gout, std::int64_t gcs, T* gx, T* gy, const Layout& l) {
  for (std::int64_t c = 0; c < l.g; ++c) {
    gather_run(gx + c * l.pc, gout, gcs, l.pc);
    gout += l.pc * gcs;
    if (l.s == 1) gather_run(gy + c * l.qc, gout, gcs, l.qc);
    else scatter_shuffled(gy, gout, gcs, c * l.qc, l.qc, l);
    gout += l.qc * gcs;
  }
}

Layout layout_of(std::int64_t p, std::int64_t q, std::int64_t g, std::int64_t s) {
  return {p / g, q / g, g, s, q / s};
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t g, std::int64_t s) {
  const std::int64_t rows = out.shape()[0], width = out.shape()[1];
  const Layout l = layout_of(x.shape()[1], y.shape()[1], g, s);
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  T* op = out.data<T>();
  const std::int64_t xrs = x.strides()[0], xcs = x.strides()[1], yrs = y.strides()[0], ycs = y.strides()[1];
#pragma omp parallel for if (rows * width > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < rows; ++t) forward_row(xp + t * xrs, xcs, yp + t * yrs, ycs, op + t * width, l);
}

template <typename T>
void backward_typed(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t g,
                    std::int64_t s) {
  const std::int64_t rows = grad_out.shape()[0], width = grad_out.shape()[1];
  const std::int64_t p = grad_x.shape()[1], q = grad_y.shape()[1];
  const Layout l = layout_of(p, q, g, s);
  const T* gp = grad_out.data<T>();
  T* gxp = grad_x.data<T>();
  T* gyp = grad_y.data<T>();
  const std::int64_t grs = grad_out.strides()[0], gcs = grad_out.strides()[1];
#pragma omp parallel for if (rows * width > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < rows; ++t) backward_row(gp + t * grs, gcs, gxp + t * p, gyp + t * q, l);
}

}  // namespace

void split_mix(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t groups, std::int64_t shuffle_groups) {
  DEFINE_DISPATCH_ALL(x.dtype(), "split_mix", [&] { forward_typed<scalar_t>(x, y, out, groups, shuffle_groups); });
}

void split_mix_backward(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t groups,
                        std::int64_t shuffle_groups) {
  DEFINE_DISPATCH_ALL(grad_out.dtype(), "split_mix_backward",
                      [&] { backward_typed<scalar_t>(grad_out, grad_x, grad_y, groups, shuffle_groups); });
}

}  // namespace define::kernels::cpu
