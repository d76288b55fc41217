// Entry points of the split-mix family: checks, 2-d row views of the operands, output
// allocation, dispatch. The backends see x [T, p], y [T, q] and grad_out [T, p + q] as 2-d views
// with any (row, column) strides, outputs as contiguous 2-d tensors, and shuffle_groups >= 1.
#include "kernels/split_mix.h"

#include <algorithm>
#include <limits>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/split_mix.h"
#include "kernels/ref/split_mix.h"

namespace define::kernels {
namespace {

// t [..., w] as a 2-d view [rows, w]. Without a copy when the leading dims collapse into one row
// stride (contiguous tensors, a transposed matrix, a column slice); otherwise a contiguous copy
// (e.g. a 3-d tensor with its last two dims swapped).
Tensor as_rows(const Tensor& t) {
  const Shape& shape = t.shape();
  const Strides& strides = t.strides();
  const std::int64_t width = shape.back();
  const std::int64_t rows = width == 0 ? numel_of(Shape(shape.begin(), shape.end() - 1)) : t.numel() / width;
  std::int64_t row_stride = width, run = 0;  // run: rows covered by row_stride so far (0: none yet)
  bool collapses = true;
  for (std::int64_t d = t.dim() - 2; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (run == 0) {
      row_stride = strides[d];
      run = shape[d];
    } else if (strides[d] == row_stride * run) {
      run *= shape[d];
    } else {
      collapses = false;
      break;
    }
  }
  if (collapses) return t.as_strided({rows, width}, {row_stride, strides.back()}, t.offset());
  const Tensor c = contiguous(t);
  return c.as_strided({rows, width}, {width, 1}, c.offset());
}

// Contiguous [rows, width] view of a freshly allocated tensor.
Tensor rows_of(const Tensor& fresh, std::int64_t rows, std::int64_t width) {
  return fresh.as_strided({rows, width}, {width, 1}, 0);
}

void check_width(const char* op, const char* which, std::int64_t width, std::int64_t groups, const char* what) {
  if (width % groups != 0) fail(op, "width {} of {} is not divisible by {} {}", width, which, groups, what);
}

// Validates (groups, shuffle_groups) against the widths and returns shuffle_groups with 0 -> 1.
std::int64_t checked_shuffle(const char* op, std::int64_t p, std::int64_t q, std::int64_t groups,
                             std::int64_t shuffle_groups) {
  if (groups < 1) fail(op, "groups must be at least 1, got {}", groups);
  if (shuffle_groups < 0) fail(op, "shuffle_groups must be 0 or 1 (no shuffle) or a group count, got {}", shuffle_groups);
  check_width(op, "x", p, groups, "groups");
  check_width(op, "y", q, groups, "groups");
  if (shuffle_groups > 1) check_width(op, "y", q, shuffle_groups, "shuffle groups");
  // The CUDA kernels do their column arithmetic in 32 bits.
  if (p + q > std::numeric_limits<std::int32_t>::max()) fail(op, "output width {} is too large", p + q);
  return shuffle_groups > 1 ? shuffle_groups : 1;
}

void check_has_width(const char* op, const char* which, const Tensor& t) {
  if (!t.defined()) fail(op, "{} is an undefined tensor", which);
  if (t.dim() == 0) fail(op, "{} must have at least 1 dim (the feature dim), got a 0-d tensor", which);
}

Shape with_width(Shape shape, std::int64_t width) {
  shape.back() = width;
  return shape;
}

}  // namespace

Tensor split_mix(const Tensor& x, const Tensor& y, std::int64_t groups, std::int64_t shuffle_groups) {
  const char* op = "split_mix";
  check_has_width(op, "x", x);
  check_has_width(op, "y", y);
  check_same_device(op, {x, y});
  check_same_dtype(op, {x, y});
  if (x.dim() != y.dim() || !std::equal(x.shape().begin(), x.shape().end() - 1, y.shape().begin()))
    fail(op, "leading dims of x {} and y {} do not match", shape_str(x.shape()), shape_str(y.shape()));
  const std::int64_t p = x.shape().back(), q = y.shape().back();
  const std::int64_t s = checked_shuffle(op, p, q, groups, shuffle_groups);
  Tensor out = empty(with_width(x.shape(), p + q), {x.dtype(), x.device()});
  if (out.numel() == 0) return out;
  const Tensor x2 = as_rows(x), y2 = as_rows(y);
  DEFINE_BACKEND_CALL(op, x, split_mix, x2, y2, rows_of(out, x2.shape()[0], p + q), groups, s);
  return out;
}

SplitMixGrads split_mix_backward(const Tensor& grad_out, std::int64_t x_width, std::int64_t groups,
                                 std::int64_t shuffle_groups) {
  const char* op = "split_mix_backward";
  check_has_width(op, "grad_out", grad_out);
  const std::int64_t width = grad_out.shape().back();
  if (x_width < 0 || x_width > width) fail(op, "x width {} does not fit in grad_out {}", x_width, shape_str(grad_out.shape()));
  const std::int64_t p = x_width, q = width - x_width;
  const std::int64_t s = checked_shuffle(op, p, q, groups, shuffle_groups);
  SplitMixGrads g{empty(with_width(grad_out.shape(), p), {grad_out.dtype(), grad_out.device()}),
                  empty(with_width(grad_out.shape(), q), {grad_out.dtype(), grad_out.device()})};
  if (grad_out.numel() == 0) return g;
  const Tensor go = as_rows(grad_out);
  const std::int64_t rows = go.shape()[0];
  DEFINE_BACKEND_CALL(op, grad_out, split_mix_backward, go, rows_of(g.grad_x, rows, p), rows_of(g.grad_y, rows, q),
                      groups, s);
  return g;
}

// An empty x ([..., 0]) and one group: the same kernels with only the shuffled y chunk.
Tensor channel_shuffle(const Tensor& y, std::int64_t shuffle_groups) {
  const char* op = "channel_shuffle";
  check_has_width(op, "y", y);
  if (shuffle_groups < 1) fail(op, "shuffle_groups must be at least 1, got {}", shuffle_groups);
  check_width(op, "y", y.shape().back(), shuffle_groups, "shuffle groups");
  const Tensor no_x = empty(with_width(y.shape(), 0), {y.dtype(), y.device()});
  return split_mix(no_x, y, 1, shuffle_groups);
}

Tensor channel_shuffle_backward(const Tensor& grad_out, std::int64_t shuffle_groups) {
  const char* op = "channel_shuffle_backward";
  check_has_width(op, "grad_out", grad_out);
  if (shuffle_groups < 1) fail(op, "shuffle_groups must be at least 1, got {}", shuffle_groups);
  check_width(op, "grad_out", grad_out.shape().back(), shuffle_groups, "shuffle groups");
  return split_mix_backward(grad_out, 0, 1, shuffle_groups).grad_y;
}

}  // namespace define::kernels
