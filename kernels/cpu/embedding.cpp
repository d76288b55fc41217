// Fast CPU embedding kernels. The lookup copies rows in parallel. The backward must add many
// positions into the same row without float atomics and without depending on the thread
// count: a counting sort groups positions by token id (stable, so each group stays in position
// order), then each weight row is owned by one thread, which sums its group in that fixed order.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <vector>

#include "kernels/copy.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;

// Positions grouped by row: the positions of row v are order[start[v] .. start[v + 1]).
struct RowGroups {
  std::vector<std::int64_t> start, order;
};

template <typename I>
RowGroups group_by_row(const I* idx, std::int64_t n, std::int64_t rows) {
  RowGroups g;
  g.start.assign(static_cast<std::size_t>(rows + 1), 0);
  for (std::int64_t p = 0; p < n; ++p) ++g.start[static_cast<std::size_t>(idx[p]) + 1];
  for (std::int64_t v = 0; v < rows; ++v) g.start[v + 1] += g.start[v];
  std::vector<std::int64_t> cursor(g.start.begin(), g.start.end() - 1);
  g.order.resize(static_cast<std::size_t>(n));
  for (std::int64_t p = 0; p < n; ++p) g.order[static_cast<std::size_t>(cursor[static_cast<std::size_t>(idx[p])]++)] = p;
  return g;
}

template <typename T, typename I>
void lookup_rows(const Tensor& weight, const I* idx, const Tensor& out) {
  const std::int64_t n = out.shape()[0], width = out.shape()[1], rs = weight.strides()[0];
  const T* pw = weight.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for if (n * width > kParallelGrain) schedule(static)
  for (std::int64_t p = 0; p < n; ++p) {
    const T* row = pw + static_cast<std::int64_t>(idx[p]) * rs;
    std::copy(row, row + width, po + p * width);
  }
}

// Row v of grad_weight = sum of grad_out rows in group v, in position order; one thread per row.
// Accumulating, only the rows some position names are visited (a batch names a few hundred of a
// vocabulary's rows), each added to in place.
template <typename T>
void sum_groups(const Tensor& grad_out, const RowGroups& groups, const Tensor& grad_weight, std::int64_t padding_idx,
                bool accumulate) {
  const std::int64_t n = grad_out.shape()[0], width = grad_out.shape()[1], rows = grad_weight.shape()[0];
  const T* pg = grad_out.data<T>();
  T* pw = grad_weight.data<T>();
  auto add_group = [&](std::int64_t v) {
    T* row = pw + v * width;
    for (std::int64_t q = groups.start[v]; q < groups.start[v + 1]; ++q) {
      const T* g = pg + groups.order[static_cast<std::size_t>(q)] * width;
      for (std::int64_t k = 0; k < width; ++k) row[k] += g[k];
    }
  };
  if (accumulate) {
    std::vector<std::int64_t> named;
    for (std::int64_t v = 0; v < rows; ++v)
      if (groups.start[v + 1] > groups.start[v] && v != padding_idx) named.push_back(v);
    const auto count = static_cast<std::int64_t>(named.size());
#pragma omp parallel for if (n * width > kParallelGrain) schedule(dynamic, 8)
    for (std::int64_t i = 0; i < count; ++i) add_group(named[static_cast<std::size_t>(i)]);
    return;
  }
  // Dynamic schedule: token frequencies are skewed, so row costs vary widely.
#pragma omp parallel for if ((n + rows) * width > kParallelGrain) schedule(dynamic, 64)
  for (std::int64_t v = 0; v < rows; ++v) {
    std::fill(pw + v * width, pw + (v + 1) * width, T(0));
    if (v != padding_idx) add_group(v);  // the padding row never learns
  }
}

}  // namespace

void embedding(const Tensor& weight_in, const Tensor& indices, const Tensor& out) {
  // Rows must be unit-stride to copy them whole; anything else is made contiguous once.
  const Tensor weight = weight_in.strides()[1] == 1 ? weight_in : kernels::contiguous(weight_in);
  DEFINE_DISPATCH_FLOAT(weight.dtype(), "embedding", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(indices.dtype(), "embedding", [&] { lookup_rows<T>(weight, indices.data<scalar_t>(), out); });
  });
}

void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight,
                        std::int64_t padding_idx, bool accumulate) {
  const std::int64_t n = grad_out.shape()[0], rows = grad_weight.shape()[0];
  RowGroups groups;
  DEFINE_DISPATCH_INDEX(indices.dtype(), "embedding_backward",
                        [&] { groups = group_by_row(indices.data<scalar_t>(), n, rows); });
  DEFINE_DISPATCH_FLOAT(grad_out.dtype(), "embedding_backward",
                        [&] { sum_groups<scalar_t>(grad_out, groups, grad_weight, padding_idx, accumulate); });
}

}  // namespace define::kernels::cpu
