#include "kernels/reduce.h"

#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/reduce.h"
#include "kernels/ref/reduce.h"

namespace define::kernels {
namespace {

// Which dims of x a dims list selects (empty list = all). Rejects repeats and out-of-range dims.
std::vector<bool> reduced_dims(const char* op, const Tensor& x, const std::vector<std::int64_t>& dims) {
  const std::int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<std::size_t>(nd), dims.empty());
  for (std::int64_t d : dims) {
    const int k = normalize_dim(d, nd, op);
    if (nd == 0) continue;  // a 0-d tensor accepts dim 0/-1 and has nothing to reduce
    if (mask[k]) fail(op, "dim {} appears more than once in the dims to reduce", d);
    mask[k] = true;
  }
  return mask;
}

// View `t` (fresh, contiguous) as `shape`.
Tensor view_as_shape(const Tensor& t, const Shape& shape) {
  return t.as_strided(shape, contiguous_strides(shape), t.offset());
}

Tensor sum_impl(const char* op, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                bool average) {
  // 16-bit inputs sum in float and round the result once (the GPUs' kernels read them directly).
  if (any_float16({x}) && !has_float16_kernels(x))
    return narrow(sum_impl(op, widen(x, x), dims, keepdim, average), x.dtype());
  check_floating(op, x);
  const std::vector<bool> mask = reduced_dims(op, x, dims);
  Shape keep_shape = x.shape(), out_shape;
  std::int64_t count = 1;
  for (std::size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) {
      count *= x.shape()[d];
      keep_shape[d] = 1;
    } else {
      out_shape.push_back(x.shape()[d]);
    }
  }
  const double scale = average ? 1.0 / static_cast<double>(count) : 1.0;
  Tensor out = empty(keep_shape, {x.dtype(), x.device()});
  if (x.numel() == 0) {
    // Sum of nothing is 0; mean of nothing is NaN (as in PyTorch).
    fill(out, average ? std::numeric_limits<double>::quiet_NaN() : 0.0);
  } else {
    DEFINE_BACKEND_CALL(op, x, sum, x, out, scale);
  }
  return keepdim ? out : view_as_shape(out, out_shape);
}

// The kept-dim shape of max's output and the output shape as returned.
void max_shapes(const Tensor& x, int d, Shape& keep_shape, Shape& out_shape) {
  keep_shape = x.shape();
  out_shape.clear();
  if (x.dim() == 0) return;
  keep_shape[d] = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (i != d) out_shape.push_back(x.shape()[i]);
}

std::pair<Tensor, Tensor> max_impl(const char* op, const Tensor& x, std::int64_t dim, bool keepdim,
                                   bool want_values) {
  if (any_float16({x}) && !has_float16_kernels(x)) {
    auto r = max_impl(op, widen(x, x), dim, keepdim, want_values);
    return {narrow(r.first, x.dtype()), r.second};
  }
  check_floating(op, x);
  const int d = normalize_dim(dim, x.dim(), op);
  if (x.dim() > 0 && x.shape()[d] == 0)
    fail(op, "cannot reduce over dim {} of size 0 (shape {})", dim, shape_str(x.shape()));
  Shape keep_shape, out_shape;
  max_shapes(x, d, keep_shape, out_shape);
  Tensor values = want_values ? empty(keep_shape, {x.dtype(), x.device()}) : Tensor();
  Tensor indices = empty(keep_shape, {DType::Int64, x.device()});
  if (x.numel() > 0) DEFINE_BACKEND_CALL(op, x, max, x, values, indices, x.dim() == 0 ? 0 : d);
  if (keepdim) return {values, indices};
  return {want_values ? view_as_shape(values, out_shape) : Tensor(), view_as_shape(indices, out_shape)};
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_impl("sum", x, dims, keepdim, false);
}

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_impl("mean", x, dims, keepdim, true);
}

Tensor sum_of_squares(const Tensor& x) {
  const char* op = "sum_of_squares";
  // A statistic: float32 for 16-bit x (the GPUs' kernel reads x directly).
  if (any_float16({x}) && !has_float16_kernels(x)) return narrow(sum_of_squares(widen(x, x)), DType::Float32);
  check_floating(op, x);
  Tensor out = empty(Shape(static_cast<std::size_t>(x.dim()), 1), {statistics_dtype(x.dtype()), x.device()});
  if (x.numel() == 0) fill(out, 0.0);
  else DEFINE_BACKEND_CALL(op, x, sum_of_squares, x, out);
  return view_as_shape(out, {});
}

// True when `from` broadcasts to exactly `to` (numpy rules, `to` never grows).
static bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (!broadcasts_to(shape, x.shape()))
    fail("sum_to", "cannot reduce a tensor of shape {} to {}: the target does not broadcast to it",
         shape_str(x.shape()), shape_str(shape));
  const std::size_t lead = x.shape().size() - shape.size();
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < x.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(static_cast<std::int64_t>(i));
  // No dim to reduce means only size-1 dims differ: a reshape (sum over "no dims" would be all).
  if (dims.empty()) return view_as_shape(contiguous(x), shape);
  return view_as_shape(sum_impl("sum_to", x, dims, true, false), shape);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (!broadcasts_to(x.shape(), shape))
    fail("broadcast_to", "cannot broadcast a tensor of shape {} to {}", shape_str(x.shape()), shape_str(shape));
  Tensor out = empty(shape, {x.dtype(), x.device()});
  copy_into(out, x);
  return out;
}

std::pair<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim) {
  return max_impl("max", x, dim, keepdim, true);
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  return max_impl("argmax", x, dim, keepdim, false).second;
}

Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, std::int64_t dim,
                    bool keepdim) {
  const char* op = "max backward";
  if (any_float16({grad}) && !has_float16_kernels(grad))
    return narrow(max_backward(widen(grad, grad), indices, input_shape, dim, keepdim), grad.dtype());
  check_floating(op, grad);
  check_same_device(op, {grad, indices});
  if (indices.dtype() != DType::Int64) fail(op, "indices must be int64, got {}", dtype_name(indices.dtype()));
  const std::int64_t nd = static_cast<std::int64_t>(input_shape.size());
  const int d = normalize_dim(dim, nd, op);
  Shape keep_shape = input_shape;
  if (nd > 0) keep_shape[d] = 1;
  if (grad.shape() != indices.shape() || numel_of(grad.shape()) != numel_of(keep_shape) ||
      (keepdim && grad.shape() != keep_shape))
    fail(op, "gradient {} and indices {} do not match an input of shape {} reduced over dim {}",
         shape_str(grad.shape()), shape_str(indices.shape()), shape_str(input_shape), dim);
  Tensor grad_input = zeros(input_shape, {grad.dtype(), grad.device()});
  if (numel_of(input_shape) == 0) return grad_input;
  const Tensor g = view_as_shape(contiguous(grad), keep_shape);
  const Tensor idx = view_as_shape(contiguous(indices), keep_shape);
  DEFINE_BACKEND_CALL(op, grad, max_backward, g, idx, grad_input, nd == 0 ? 0 : d);
  return grad_input;
}

}  // namespace define::kernels
