// TensorIterator: the loop structure shared by the elementwise kernels (ref and cpu).
//
// Operand 0 is the output; it fixes the iteration shape, and every other operand must broadcast
// to it (stride 0 on stretched dims). The constructor drops size-1 dims and merges neighbouring
// dims that are laid out contiguously with respect to each other in *every* operand, so a
// contiguous [2,3,4] + [4] becomes a [6,4] loop and a fully contiguous op becomes one flat loop.
// The work is then a sequence of rows along the innermost (coalesced) dim: callers hand an
// element range to for_each_range() and get called once per (partial) row with each operand's
// element offset and its inner stride. Ranges let the cpu path split the work across threads
// without caring where rows begin or end.
//
// Offsets and strides are in elements of each operand (operands may have different dtypes).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

class TensorIterator {
 public:
  static constexpr int kMaxOperands = 4;

  // operands[0] is the output. Throws "<op>: ..." when an input does not broadcast to it.
  TensorIterator(const char* op, std::initializer_list<Tensor> operands);

  int num_operands() const { return nops_; }
  std::int64_t numel() const { return numel_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  std::int64_t stride(int operand, int dim) const { return strides_[operand][dim]; }
  std::int64_t inner_size() const { return shape_.back(); }
  std::int64_t inner_stride(int operand) const { return strides_[operand].back(); }
  // True when the whole iteration is one loop with stride 1 in every operand.
  bool is_flat() const;

  // Calls f(offsets, n, inner_strides) for every run of consecutive elements of the same row
  // that falls in the row-major element range [begin, end). offsets[k] is operand k's element
  // offset (from its data<T>() pointer) of the run's first element; inner_strides[k] its stride.
  template <typename F>
  void for_each_range(std::int64_t begin, std::int64_t end, F&& f) const;

 private:
  int nops_ = 0;
  std::int64_t numel_ = 0;
  Shape shape_;                                   // coalesced, innermost last, at least 1 dim
  std::array<Strides, kMaxOperands> strides_;     // per operand, aligned with shape_
};

template <typename F>
void TensorIterator::for_each_range(std::int64_t begin, std::int64_t end, F&& f) const {
  if (begin >= end || numel_ == 0) return;
  const int nd = ndim();
  const std::int64_t inner = shape_[nd - 1];
  std::array<std::int64_t, kMaxOperands> off{}, inner_st{};
  for (int k = 0; k < nops_; ++k) inner_st[k] = strides_[k][nd - 1];

  // Position of `begin`: its column in the row and the multi-index of its row (outer dims).
  std::int64_t col = begin % inner;
  std::int64_t row = begin / inner;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(nd), 0);
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = row % shape_[d];
    row /= shape_[d];
  }
  for (int k = 0; k < nops_; ++k) {
    std::int64_t o = col * inner_st[k];
    for (int d = 0; d < nd - 1; ++d) o += idx[d] * strides_[k][d];
    off[k] = o - col * inner_st[k];  // offset of the row start; the column is added per call
  }

  std::int64_t i = begin;
  while (i < end) {
    const std::int64_t n = std::min(inner - col, end - i);
    std::array<std::int64_t, kMaxOperands> run{};
    for (int k = 0; k < nops_; ++k) run[k] = off[k] + col * inner_st[k];
    f(run.data(), n, inner_st.data());
    i += n;
    col = 0;
    if (i >= end) break;
    for (int d = nd - 2; d >= 0; --d) {  // odometer over the outer dims
      for (int k = 0; k < nops_; ++k) off[k] += strides_[k][d];
      if (++idx[d] < shape_[d]) break;
      for (int k = 0; k < nops_; ++k) off[k] -= strides_[k][d] * shape_[d];
      idx[d] = 0;
    }
  }
}

}  // namespace define::kernels
