// Entry points of the grouped-linear family: checks, 2-d contiguous views, output allocation, dispatch.
// Backends receive x as [T, g*k_in] and dy as [T, g*k_out] (T = product of the leading dims), and
// only ever see non-empty reductions: outputs whose reduction is empty are zero-filled here and
// passed on undefined, as are outputs with no elements.
#include "kernels/grouped_linear.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/grouped_linear.h"
#include "kernels/ref/grouped_linear.h"

namespace define::kernels {
namespace {

struct GroupedShape {
  std::int64_t groups = 0, k_in = 0, k_out = 0;
};

// Validates weight [g, k_in, k_out] and returns its sizes.
GroupedShape check_weight(const char* op, const Tensor& weight) {
  if (!weight.defined()) fail(op, "weight must be defined");
  if (weight.dim() != 3)
    fail(op, "weight must be 3-d [groups, in_per_group, out_per_group], got {}", shape_str(weight.shape()));
  const GroupedShape s{weight.shape()[0], weight.shape()[1], weight.shape()[2]};
  if (s.groups < 1) fail(op, "weight {} has no groups", shape_str(weight.shape()));
  return s;
}

// Checks that x's last dim splits into g chunks of weight's k_in features.
void check_input_width(const char* op, const Tensor& x, const Tensor& weight, const GroupedShape& s) {
  if (x.dim() == 0) fail(op, "expected an input with at least 1 dim, got a 0-d tensor");
  const std::int64_t width = x.shape().back();
  if (width % s.groups != 0) fail(op, "input width {} is not divisible by {} groups", width, s.groups);
  if (width / s.groups != s.k_in)
    fail(op, "input width {} gives {} features per group but weight {} expects {}", width, width / s.groups,
         shape_str(weight.shape()), s.k_in);
}

std::int64_t leading_rows(const Tensor& t) { return numel_of(Shape(t.shape().begin(), t.shape().end() - 1)); }

// Whether the defined tensors of ts share one dtype.
bool same_dtypes(std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (first && t.dtype() != first->dtype()) return false;
    if (!first) first = &t;
  }
  return true;
}

Tensor contiguous_matrix(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  const Tensor c = contiguous(t);
  return c.as_strided({rows, cols}, {cols, 1}, c.offset());
}

Shape with_last(Shape s, std::int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

Tensor grouped_linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const char* op = "grouped_linear";
  if (!x_in.defined()) fail(op, "input must be defined");
  // The GPUs have a 16-bit kernel (operands of one dtype, as autocast gives them); the CPU paths
  // and mixed dtypes widen.
  if (any_float16({x_in, weight_in, bias_in}) &&
      !(has_float16_kernels(x_in) && same_dtypes({x_in, weight_in, bias_in})))
    return narrow(grouped_linear(widen(x_in, x_in), widen(weight_in, x_in), widen(bias_in, x_in)), x_in.dtype());
  check_floating(op, x_in);
  check_same_device(op, {x_in, weight_in, bias_in});
  check_same_dtype(op, {x_in, weight_in, bias_in});
  const GroupedShape s = check_weight(op, weight_in);
  check_input_width(op, x_in, weight_in, s);
  if (bias_in.defined() && bias_in.shape() != Shape{s.groups, s.k_out})
    fail(op, "bias of shape {} does not match [{},{}] (weight {})", shape_str(bias_in.shape()), s.groups, s.k_out,
         shape_str(weight_in.shape()));
  const std::int64_t rows = leading_rows(x_in);
  const TensorOptions opt{x_in.dtype(), x_in.device()};
  const Tensor x = contiguous_matrix(x_in, rows, s.groups * s.k_in);
  const Tensor y = empty({rows, s.groups * s.k_out}, opt);
  // k_in == 0 is left to the backends: y is then the bias (or zeros), which they produce anyway.
  if (y.numel() > 0) {
    const Tensor bias = bias_in.defined() ? contiguous(bias_in) : bias_in;
    DEFINE_BACKEND_CALL(op, x, grouped_linear, x, contiguous(weight_in), bias, y);
  }
  const Shape y_shape = with_last(x_in.shape(), s.groups * s.k_out);
  return y.as_strided(y_shape, contiguous_strides(y_shape), y.offset());
}

GroupedLinearGrads grouped_linear_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight_in,
                                           bool need_dx, bool need_dweight, bool need_dbias) {
  const char* op = "grouped_linear_backward";
  if (!dy_in.defined()) fail(op, "gradient must be defined");
  if (any_float16({dy_in, x_in, weight_in}) && !(has_float16_kernels(dy_in) && same_dtypes({dy_in, x_in, weight_in}))) {
    GroupedLinearGrads r = grouped_linear_backward(widen(dy_in, dy_in), widen(x_in, dy_in), widen(weight_in, dy_in),
                                                   need_dx, need_dweight, need_dbias);
    const DType x_dtype = x_in.defined() ? x_in.dtype() : dy_in.dtype();
    return {narrow(r.dx, x_dtype), narrow(r.dweight, weight_in.dtype()), narrow(r.dbias, weight_in.dtype())};
  }
  check_floating(op, dy_in);
  check_same_device(op, {dy_in, x_in, weight_in});
  check_same_dtype(op, {dy_in, x_in, weight_in});
  const GroupedShape s = check_weight(op, weight_in);
  if (dy_in.dim() == 0) fail(op, "expected a gradient with at least 1 dim, got a 0-d tensor");
  if (dy_in.shape().back() != s.groups * s.k_out)
    fail(op, "gradient width {} does not match {} groups of {} outputs (weight {})", dy_in.shape().back(), s.groups,
         s.k_out, shape_str(weight_in.shape()));
  const Shape x_shape = with_last(dy_in.shape(), s.groups * s.k_in);
  if (x_in.defined()) {
    check_input_width(op, x_in, weight_in, s);
    if (x_in.shape() != x_shape)
      fail(op, "gradient of shape {} does not match input of shape {}", shape_str(dy_in.shape()),
           shape_str(x_in.shape()));
  } else if (need_dweight) {
    fail(op, "the weight gradient needs the input, got an undefined tensor");
  }
  const std::int64_t rows = leading_rows(dy_in);
  const TensorOptions opt{dy_in.dtype(), dy_in.device()};

  // Zero-filled where the sum that defines them is empty (no rows; no output features for dx).
  GroupedLinearGrads g;
  if (need_dx) g.dx = s.k_out == 0 ? zeros({rows, s.groups * s.k_in}, opt) : empty({rows, s.groups * s.k_in}, opt);
  if (need_dweight) g.dweight = rows == 0 ? zeros(weight_in.shape(), opt) : empty(weight_in.shape(), opt);
  if (need_dbias) g.dbias = rows == 0 ? zeros({s.groups, s.k_out}, opt) : empty({s.groups, s.k_out}, opt);

  // What the backend still has to compute: non-empty outputs of non-empty sums.
  const auto pending = [](const Tensor& t, bool empty_sum) {
    return t.defined() && t.numel() > 0 && !empty_sum ? t : Tensor();
  };
  const Tensor dx = pending(g.dx, s.k_out == 0), dw = pending(g.dweight, rows == 0),
               db = pending(g.dbias, rows == 0);
  if (dx.defined() || dw.defined() || db.defined()) {
    // x is read only for dweight (and may then be absent).
    const Tensor x = dw.defined() ? contiguous_matrix(x_in, rows, s.groups * s.k_in) : Tensor();
    const Tensor dy = contiguous_matrix(dy_in, rows, s.groups * s.k_out);
    DEFINE_BACKEND_CALL(op, dy, grouped_linear_backward, dy, x, contiguous(weight_in), dx, dw, db);
  }
  if (g.dx.defined()) g.dx = g.dx.as_strided(x_shape, contiguous_strides(x_shape), g.dx.offset());
  return g;
}

}  // namespace define::kernels
