// Fast CPU reductions.
//
// Accumulation: in double, for float32 as well. Reductions are bound by memory bandwidth, so the
// float->double widening costs little, while a float accumulator loses about log2(n) bits over
// an n-element sum (a 1M-element mean would be off in the 4th digit). Each output is summed in an
// order fixed by the shapes alone (fixed 8-lane accumulators, fixed chunk sizes, partial sums
// combined in order), so results are bitwise identical whatever the number of threads.
//
// Layouts: the input is made contiguous and its dims (size-1 dims dropped) merged into
// alternating kept/reduced groups. [K,R] is "rows" (reduce trailing dims, e.g. a mean over
// features), [R,K] and [K1,R,K2] are "columns" (reduce leading/middle dims, e.g. a bias gradient);
// anything else is permuted into rows with one copy.
#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/copy.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;
constexpr std::int64_t kRowChunk = 1 << 14;  // elements per partial sum of a long row
constexpr std::int64_t kColBlock = 512;      // columns per task: the double accumulators stay in L1

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// An element as it enters a sum: itself, or its square (sum_of_squares), in double.
template <bool kSquares, typename T>
double term(T v) {
  const double d = static_cast<double>(v);
  return kSquares ? d * d : d;
}

// Sum of n contiguous elements (or of their squares) with 8 independent double accumulators
// (vectorisable, and without the serial dependency of a single accumulator).
template <bool kSquares, typename T>
double sum_contiguous(const T* p, std::int64_t n) {
  std::array<double, 8> acc{};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += term<kSquares>(p[i + j]);
  double tail = 0;
  for (; i < n; ++i) tail += term<kSquares>(p[i]);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// out[k] = scale * sum_r x[k, r] (of x[k, r]^2 with kSquares) for a contiguous [K, R] block.
// Long rows are cut into fixed chunks summed in parallel, then combined in order.
template <typename T, bool kSquares = false>
void row_sums(const T* x, T* out, std::int64_t K, std::int64_t R, double scale) {
  const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(R, kRowChunk));
  const std::int64_t work = K * R;
  if (chunks == 1) {
#pragma omp parallel for if (work > kParallelGrain) schedule(static)
    for (std::int64_t k = 0; k < K; ++k) out[k] = static_cast<T>(sum_contiguous<kSquares>(x + k * R, R) * scale);
    return;
  }
  std::vector<double> partial(static_cast<std::size_t>(K * chunks));
  const std::int64_t tasks = K * chunks;
#pragma omp parallel for if (work > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t k = t / chunks, begin = (t % chunks) * kRowChunk;
    partial[t] = sum_contiguous<kSquares>(x + k * R + begin, std::min(kRowChunk, R - begin));
  }
  for (std::int64_t k = 0; k < K; ++k) {
    double s = 0;
    for (std::int64_t c = 0; c < chunks; ++c) s += partial[k * chunks + c];
    out[k] = static_cast<T>(s * scale);
  }
}

// out[k1, k2] = scale * sum_r x[k1, r, k2] for a contiguous [K1, R, K2] block. Tasks cover a
// block of columns of one k1 and add whole rows into double accumulators (vectorised along the
// columns). When that gives few tasks (a long, narrow input), the rows are also split into a
// shape-determined number of chunks whose partial sums are combined in order.
template <typename T>
void column_sums(const T* x, T* out, std::int64_t K1, std::int64_t R, std::int64_t K2, double scale) {
  const std::int64_t blocks = ceil_div(K2, kColBlock);
  std::int64_t row_chunks = 1;
  if (K1 * blocks < 16 && R * std::min(K2, kColBlock) > kParallelGrain)
    row_chunks = std::min<std::int64_t>(16, ceil_div(R, 64));
  const std::int64_t rows_per_chunk = ceil_div(R, row_chunks);
  row_chunks = ceil_div(R, rows_per_chunk);
  std::vector<double> partial(row_chunks > 1 ? static_cast<std::size_t>(K1 * row_chunks * K2) : 0);
  const std::int64_t tasks = K1 * blocks * row_chunks;
  const std::int64_t work = K1 * R * K2;
#pragma omp parallel for if (work > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t rc = t % row_chunks, b = (t / row_chunks) % blocks, k1 = t / (row_chunks * blocks);
    const std::int64_t c0 = b * kColBlock, width = std::min(kColBlock, K2 - c0);
    const std::int64_t r0 = rc * rows_per_chunk, r1 = std::min(R, r0 + rows_per_chunk);
    std::array<double, kColBlock> acc;
    std::fill(acc.begin(), acc.begin() + width, 0.0);
    // Four rows per sweep: a quarter of the accumulator loads/stores, which bound this loop.
    std::int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      const T* p0 = x + (k1 * R + r) * K2 + c0;
      const T* p1 = p0 + K2;
      const T* p2 = p1 + K2;
      const T* p3 = p2 + K2;
      for (std::int64_t j = 0; j < width; ++j)
        acc[j] += (static_cast<double>(p0[j]) + static_cast<double>(p1[j])) +
                  (static_cast<double>(p2[j]) + static_cast<double>(p3[j]));
    }
    for (; r < r1; ++r) {
      const T* row = x + (k1 * R + r) * K2 + c0;
      for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
    if (row_chunks == 1) {
      for (std::int64_t j = 0; j < width; ++j) out[k1 * K2 + c0 + j] = static_cast<T>(acc[j] * scale);
    } else {
      double* dst = partial.data() + (k1 * row_chunks + rc) * K2 + c0;
      std::copy(acc.begin(), acc.begin() + width, dst);
    }
  }
  if (row_chunks == 1) return;
  for (std::int64_t k1 = 0; k1 < K1; ++k1)
    for (std::int64_t k2 = 0; k2 < K2; ++k2) {
      double s = 0;
      for (std::int64_t rc = 0; rc < row_chunks; ++rc) s += partial[(k1 * row_chunks + rc) * K2 + k2];
      out[k1 * K2 + k2] = static_cast<T>(s * scale);
    }
}

// Nothing is actually reduced (only size-1 dims were named): out = scale * x.
template <typename T>
void scaled_copy(const T* x, T* out, std::int64_t n, double scale) {
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<double>(x[i]) * scale);
}

struct Group {
  std::int64_t size;
  bool reduced;
};

template <typename T>
void sum_typed(const Tensor& x_in, const Tensor& out, double scale) {
  const Tensor x = contiguous(x_in);
  const T* px = x.data<T>();
  T* po = out.data<T>();
  std::vector<Group> groups;
  for (std::size_t d = 0; d < x.shape().size(); ++d) {
    const std::int64_t size = x.shape()[d];
    if (size == 1) continue;
    const bool reduced = out.shape()[d] == 1;
    if (!groups.empty() && groups.back().reduced == reduced) groups.back().size *= size;
    else groups.push_back({size, reduced});
  }
  const std::size_t n = groups.size();
  if (n == 0 || (n == 1 && !groups[0].reduced)) return scaled_copy(px, po, x.numel(), scale);
  if (n == 1) return row_sums(px, po, 1, groups[0].size, scale);
  if (n == 2 && !groups[0].reduced) return row_sums(px, po, groups[0].size, groups[1].size, scale);
  if (n == 2) return column_sums(px, po, 1, groups[0].size, groups[1].size, scale);
  if (n == 3 && !groups[0].reduced) return column_sums(px, po, groups[0].size, groups[1].size, groups[2].size, scale);

  // Interleaved layout: move the reduced dims last (one copy), then sum rows.
  Shape shape;
  Strides strides;
  std::int64_t kept = 1, reduced = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t d = 0; d < x.shape().size(); ++d) {
      const bool is_reduced = out.shape()[d] == 1 && x.shape()[d] != 1;
      if (is_reduced != (pass == 1)) continue;
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
      (is_reduced ? reduced : kept) *= x.shape()[d];
    }
  const Tensor rows = contiguous(x.as_strided(shape, strides, x.offset()));
  row_sums(rows.data<T>(), po, kept, reduced, scale);
}

// Extents of a contiguous tensor around `dim`: [outer, len, inner].
void split_at(const Shape& shape, int dim, std::int64_t& outer, std::int64_t& len, std::int64_t& inner) {
  outer = len = inner = 1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < dim) outer *= shape[d];
    else if (d == dim) len = shape[d];
    else inner *= shape[d];
  }
}

// The running maximum moves on to v when v is larger, or when v is the first NaN.
template <typename T>
bool beats(T v, T best) {
  return v > best || (v != v && best == best);
}

template <typename T>
void max_typed(const Tensor& x_in, const Tensor& values, const Tensor& indices, int dim) {
  const Tensor x = contiguous(x_in);
  const T* px = x.data<T>();
  T* pv = values.defined() ? values.data<T>() : nullptr;
  std::int64_t* pi = indices.data<std::int64_t>();
  std::int64_t K1, R, K2;
  split_at(x.shape(), dim, K1, R, K2);
  const std::int64_t work = K1 * R * K2;
  if (K2 == 1) {  // contiguous lines
#pragma omp parallel for if (work > kParallelGrain) schedule(static)
    for (std::int64_t k = 0; k < K1; ++k) {
      const T* line = px + k * R;
      T best = line[0];
      std::int64_t best_i = 0;
      for (std::int64_t r = 1; r < R; ++r)
        if (beats(line[r], best)) {
          best = line[r];
          best_i = r;
        }
      if (pv) pv[k] = best;
      pi[k] = best_i;
    }
    return;
  }
  // Lines strided by K2: sweep whole rows, keeping a running best per column.
  const std::int64_t blocks = ceil_div(K2, kColBlock);
  const std::int64_t tasks = K1 * blocks;
#pragma omp parallel for if (work > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t k1 = t / blocks, c0 = (t % blocks) * kColBlock, width = std::min(kColBlock, K2 - c0);
    std::array<T, kColBlock> best;
    std::array<std::int64_t, kColBlock> best_i{};
    const T* base = px + k1 * R * K2 + c0;
    std::copy(base, base + width, best.begin());
    for (std::int64_t r = 1; r < R; ++r) {
      const T* row = base + r * K2;
      for (std::int64_t j = 0; j < width; ++j)
        if (beats(row[j], best[j])) {
          best[j] = row[j];
          best_i[j] = r;
        }
    }
    for (std::int64_t j = 0; j < width; ++j) {
      if (pv) pv[k1 * K2 + c0 + j] = best[j];
      pi[k1 * K2 + c0 + j] = best_i[j];
    }
  }
}

template <typename T>
void max_backward_typed(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  const T* pg = grad.data<T>();
  const std::int64_t* pi = indices.data<std::int64_t>();
  T* px = grad_input.data<T>();
  std::int64_t K1, R, K2;
  split_at(grad_input.shape(), dim, K1, R, K2);
  const std::int64_t n = K1 * K2;
  // Each (k1, k2) owns its own line of grad_input: no two iterations write the same element.
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t k1 = t / K2, k2 = t % K2;
    px[(k1 * R + pi[t]) * K2 + k2] += pg[t];
  }
}

}  // namespace

void sum(const Tensor& x, const Tensor& out, double scale) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "sum", [&] { sum_typed<scalar_t>(x, out, scale); });
}

void sum_of_squares(const Tensor& x_in, const Tensor& out) {
  const Tensor x = contiguous(x_in);
  DEFINE_DISPATCH_FLOAT(x.dtype(), "sum_of_squares", [&] {
    row_sums<scalar_t, true>(x.data<scalar_t>(), out.data<scalar_t>(), 1, x.numel(), 1.0);
  });
}

void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "max", [&] { max_typed<scalar_t>(x, values, indices, dim); });
}

void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  DEFINE_DISPATCH_FLOAT(grad.dtype(), "max backward", [&] { max_backward_typed<scalar_t>(grad, indices, grad_input, dim); });
}

}  // namespace define::kernels::cpu
