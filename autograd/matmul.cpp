#include "autograd/matmul.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/views.h"
#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/matmul.h"

namespace define {
namespace {

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail(op, "got an undefined tensor");
  kernels::check_same_device(op, {a, b});
  kernels::check_floating(op, a);
  kernels::check_same_dtype(op, {a, b});
}

// t as a [rows, cols] matrix: a view when its strides allow one, else a contiguous copy.
Tensor as_matrix(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  Strides st;
  if (compute_view_strides(t.shape(), t.strides(), {rows, cols}, st)) return t.as_strided({rows, cols}, st, t.offset());
  const Tensor c = kernels::contiguous(t);
  return c.as_strided({rows, cols}, {cols, 1}, c.offset());
}

// Sums `full` [F..., M, N] over the batch dims that `target` [T..., M, N] was broadcast along
// (missing leading dims, and size-1 dims where full is larger). The summed dims are moved to
// the front and made contiguous once, so one column sum does all the work.
Tensor reduce_to(const Tensor& full, const Shape& target) {
  if (full.shape() == target) return full;
  const std::size_t nd = full.shape().size(), lead = nd - target.size();
  Shape summed_shape, kept_shape;
  Strides summed_strides, kept_strides;
  for (std::size_t d = 0; d < nd; ++d) {
    const bool summed = d < lead || (target[d - lead] == 1 && full.shape()[d] != 1);
    (summed ? summed_shape : kept_shape).push_back(full.shape()[d]);
    (summed ? summed_strides : kept_strides).push_back(full.strides()[d]);
  }
  const std::int64_t rows = numel_of(summed_shape), cols = numel_of(kept_shape);
  summed_shape.insert(summed_shape.end(), kept_shape.begin(), kept_shape.end());
  summed_strides.insert(summed_strides.end(), kept_strides.begin(), kept_strides.end());
  const Tensor moved = kernels::contiguous(full.as_strided(summed_shape, summed_strides, full.offset()));
  const Tensor sums = kernels::column_sum(moved.as_strided({rows, cols}, {cols, 1}, moved.offset()));
  return sums.as_strided(target, contiguous_strides(target), sums.offset());
}

// Both operands >= 2-d, shapes already checked.
Tensor matmul_nd(const Tensor& a, const Tensor& b, const char* op) {
  Tensor y = kernels::matmul(a, b);
  if (needs_grad({a, b})) {
    // Each operand is saved only when the other one's gradient needs it.
    record(op, {a, b}, {y},
           [op, sa = a.shape(), sb = b.shape(), keep_a = SavedTensor(b.requires_grad() ? a : Tensor()),
            keep_b = SavedTensor(a.requires_grad() ? b : Tensor())](const BackwardArgs& g) {
             // y = a @ b:  dL/da = dL/dy @ b^T,  dL/db = a^T @ dL/dy (transposes are GEMM flags,
             // not copies), each summed over the batch dims its operand was broadcast along.
             Tensor ga, gb;
             if (g.needs(0)) ga = reduce_to(kernels::matmul(g.grad(), keep_b.get(op), false, true), sa);
             if (g.needs(1)) gb = reduce_to(kernels::matmul(keep_a.get(op), g.grad(), true, false), sb);
             return std::vector<Tensor>{ga, gb};
           });
  }
  return y;
}

Tensor matmul_2d_or_more(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dim() > 2 && b.dim() == 2) {
    // A stack of matrices times one matrix: fold the stack into the rows. One large GEMM is
    // faster than many small ones, and b's gradient then comes out already summed.
    const std::int64_t k = a.shape().back();
    Shape out = a.shape();
    out.back() = b.shape()[1];
    const std::int64_t rows = numel_of(Shape(a.shape().begin(), a.shape().end() - 1));
    return reshape(matmul_nd(reshape(a, {rows, k}), b, op), out);
  }
  return matmul_nd(a, b, op);
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast::gemm_input(a_in);
  const Tensor b = autocast::gemm_input(b_in);
  const char* op = "matmul";
  check_operands(op, a, b);
  if (a.dim() == 0 || b.dim() == 0)
    fail(op, "operands need at least 1 dim, got shapes {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  const std::int64_t ka = a.shape().back(), kb = b.shape()[b.dim() == 1 ? 0 : b.dim() - 2];
  if (ka != kb)
    fail(op, "shapes {} and {} do not match: inner dims {} and {} differ", shape_str(a.shape()),
         shape_str(b.shape()), ka, kb);
  // Batch dims (all but the last two) broadcast from the right.
  const std::int64_t na = std::max<std::int64_t>(a.dim() - 2, 0), nb = std::max<std::int64_t>(b.dim() - 2, 0);
  for (std::int64_t i = 1; i <= std::min(na, nb); ++i) {
    const std::int64_t da = a.shape()[na - i], db = b.shape()[nb - i];
    if (da != db && da != 1 && db != 1)
      fail(op, "batch dims of {} and {} cannot be broadcast", shape_str(a.shape()), shape_str(b.shape()));
  }
  // 1-d operands become a row (left) or column (right) matrix; the added dim is removed after.
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul_nd(unsqueeze(a, 0), unsqueeze(b, 1), op), {});
  if (a.dim() == 1) return squeeze(matmul_2d_or_more(unsqueeze(a, 0), b, op), -2);
  if (b.dim() == 1) return squeeze(matmul_2d_or_more(a, unsqueeze(b, 1), op), -1);
  return matmul_2d_or_more(a, b, op);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast::gemm_input(a_in);
  const Tensor b = autocast::gemm_input(b_in);
  const char* op = "bmm";
  check_operands(op, a, b);
  if (a.dim() != 3 || b.dim() != 3)
    fail(op, "expected 3-d tensors [B,M,K] and [B,K,N], got {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  if (a.shape()[0] != b.shape()[0])
    fail(op, "batch sizes of {} and {} do not match", shape_str(a.shape()), shape_str(b.shape()));
  if (a.shape()[2] != b.shape()[1])
    fail(op, "shapes {} and {} do not match: inner dims {} and {} differ", shape_str(a.shape()),
         shape_str(b.shape()), a.shape()[2], b.shape()[1]);
  return matmul_nd(a, b, op);
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = autocast::gemm_input(x_in);
  const Tensor weight = autocast::gemm_input(weight_in);
  const Tensor bias = autocast::gemm_input(bias_in);
  const char* op = "linear";
  check_operands(op, x, weight);
  kernels::check_same_device(op, {x, bias});
  kernels::check_same_dtype(op, {x, bias});
  if (weight.dim() != 2) fail(op, "weight must be 2-d [out, in], got {}", shape_str(weight.shape()));
  if (x.dim() == 0) fail(op, "input must have at least 1 dim, got a 0-d tensor");
  const std::int64_t in = weight.shape()[1], out = weight.shape()[0];
  if (x.shape().back() != in)
    fail(op, "input {} has {} features but weight {} expects {}", shape_str(x.shape()), x.shape().back(),
         shape_str(weight.shape()), in);
  if (bias.defined() && bias.shape() != Shape{out})
    fail(op, "bias shape {} does not match [{}] (weight {})", shape_str(bias.shape()), out, shape_str(weight.shape()));

  // Leading dims of x are rows of one GEMM: y2 [rows, out] = x2 [rows, in] @ weight^T (+ bias).
  const Shape x_shape = x.shape();
  const std::int64_t rows = numel_of(Shape(x_shape.begin(), x_shape.end() - 1));
  const Tensor x2 = as_matrix(x, rows, in);
  Shape y_shape = x_shape;
  y_shape.back() = out;
  Tensor y2 = empty({rows, out}, {x.dtype(), x.device()});
  if (bias.defined()) kernels::copy_into(y2, bias);  // broadcast bias rows; the GEMM adds onto them
  kernels::gemm(x2, weight, y2, false, true, 1.0, bias.defined() ? 1.0 : 0.0);
  Tensor y = y2.as_strided(y_shape, contiguous_strides(y_shape), 0);

  if (needs_grad({x, weight, bias})) {
    record(op, {x, weight, bias}, {y},
           [op, x_shape, rows, out, keep_x = SavedTensor(weight.requires_grad() ? x2 : Tensor()),
            keep_w = SavedTensor(x.requires_grad() ? weight : Tensor())](const BackwardArgs& a) {
             // y = x W^T + b:  dL/dx = g W,  dL/dW = g^T x,  dL/db = column sums of g,
             // with g = dL/dy and x seen as [rows, in].
             const Tensor g = as_matrix(a.grad(), rows, out);
             Tensor gx, gw, gb;
             if (a.needs(0)) gx = kernels::matmul(g, keep_w.get(op)).as_strided(x_shape, contiguous_strides(x_shape), 0);
             if (a.needs(1)) gw = kernels::matmul(g, keep_x.get(op), true, false);
             if (a.needs(2)) gb = kernels::column_sum(g);
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace define
