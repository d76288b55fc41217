#include "kernels/tensor_iterator.h"

namespace define::kernels {

TensorIterator::TensorIterator(const char* op, std::initializer_list<Tensor> operands) {
  if (operands.size() == 0 || operands.size() > kMaxOperands)
    fail(op, "TensorIterator takes 1 to {} operands, got {}", kMaxOperands, operands.size());
  nops_ = static_cast<int>(operands.size());
  const Tensor& out = *operands.begin();
  const Shape& full = out.shape();
  numel_ = numel_of(full);

  // Every operand's strides as seen through the output's shape.
  std::array<Strides, kMaxOperands> st;
  int k = 0;
  for (const Tensor& t : operands) {
    if (k > 0 && broadcast_shapes(full, t.shape(), op) != full)
      fail(op, "shape {} cannot be broadcast to {}", shape_str(t.shape()), shape_str(full));
    st[k++] = broadcast_strides(t.shape(), t.strides(), full);
  }

  // Walk from the innermost dim outwards, dropping size-1 dims and merging a dim into the one
  // inside it when, for every operand, stepping once along it equals a full sweep of the inner one.
  Shape rev_shape;
  std::array<Strides, kMaxOperands> rev_st;
  for (std::size_t d = full.size(); d-- > 0;) {
    const std::int64_t size = full[d];
    if (size == 1) continue;
    bool merge = !rev_shape.empty();
    for (int j = 0; merge && j < nops_; ++j)
      merge = st[j][d] == rev_st[j].back() * rev_shape.back();
    if (merge) {
      rev_shape.back() *= size;
      continue;
    }
    rev_shape.push_back(size);
    for (int j = 0; j < nops_; ++j) rev_st[j].push_back(st[j][d]);
  }
  if (rev_shape.empty()) {  // 0-d or all size-1: one element
    rev_shape.push_back(1);
    for (int j = 0; j < nops_; ++j) rev_st[j].push_back(1);
  }
  shape_.assign(rev_shape.rbegin(), rev_shape.rend());
  for (int j = 0; j < nops_; ++j) strides_[j].assign(rev_st[j].rbegin(), rev_st[j].rend());
}

bool TensorIterator::is_flat() const {
  if (shape_.size() != 1) return false;
  for (int k = 0; k < nops_; ++k)
    if (strides_[k][0] != 1 && shape_[0] != 1) return false;
  return true;
}

}  // namespace define::kernels
