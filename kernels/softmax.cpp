// Entry points of the softmax family: argument checks, contiguous inputs, output allocation,
// backend dispatch. The math lives in kernels/ref/softmax.cpp and kernels/cpu/softmax.cpp.
#include "kernels/softmax.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/float16_compute.h"
#include "kernels/cpu/softmax.h"
#include "kernels/ref/softmax.h"

namespace define::kernels {
namespace {

// Shared checks of softmax-style ops: a float tensor and a valid dim. Returns the wrapped dim.
int check_softmax_input(const char* op, const Tensor& x, std::int64_t dim) {
  check_floating(op, x);
  return normalize_dim(dim, x.dim(), op);
}

void check_backward_pair(const char* op, const Tensor& y, const Tensor& dy) {
  check_same_device(op, {y, dy});
  check_same_dtype(op, {y, dy});
  if (y.shape() != dy.shape())
    fail(op, "gradient of shape {} does not match output of shape {}", shape_str(dy.shape()), shape_str(y.shape()));
}

// Checks shared by cross_entropy and nll_loss: [N, C] scores, [N] integer targets, one device.
void check_loss_inputs(const char* op, const Tensor& scores, const Tensor& target) {
  check_floating(op, scores);
  check_dim(op, scores, 2);
  check_index(op, target);
  check_same_device(op, {scores, target});
  if (target.dim() != 1 || target.size(0) != scores.size(0))
    fail(op, "target of shape {} does not match input of shape {} (expected [{}])", shape_str(target.shape()),
         shape_str(scores.shape()), scores.size(0));
}

void check_loss_grad(const char* op, const Tensor& grad_loss, const Tensor& total_weight, std::int64_t rows,
                     DType dtype) {
  if (grad_loss.numel() != 1 && !(grad_loss.dim() == 1 && grad_loss.size(0) == rows))
    fail(op, "loss gradient of shape {} is neither a scalar nor [{}]", shape_str(grad_loss.shape()), rows);
  if (total_weight.numel() != 1) fail(op, "total_weight must have one element, got {}", shape_str(total_weight.shape()));
  if (grad_loss.dtype() != dtype || total_weight.dtype() != dtype)
    fail(op, "loss gradient and total_weight must be {}", dtype_name(dtype));
}

}  // namespace

SoftmaxLayout softmax_layout(const Shape& shape, int dim) {
  SoftmaxLayout l;
  if (shape.empty()) return l;  // a 0-d tensor is a single row of one element
  for (int i = 0; i < dim; ++i) l.outer *= shape[i];
  l.n = shape[dim];
  for (std::size_t i = dim + 1; i < shape.size(); ++i) l.inner *= shape[i];
  return l;
}

Tensor softmax(const Tensor& x_in, std::int64_t dim) {
  if (any_float16({x_in})) return narrow(softmax(widen(x_in, x_in), dim), x_in.dtype());
  const int d = check_softmax_input("softmax", x_in, dim);
  Tensor x = contiguous(x_in);
  Tensor y = empty(x.shape(), {x.dtype(), x.device()});
  if (x.numel() > 0) DEFINE_BACKEND_CALL("softmax", x, softmax, x, y, d);
  return y;
}

Tensor log_softmax(const Tensor& x_in, std::int64_t dim) {
  if (any_float16({x_in})) return narrow(log_softmax(widen(x_in, x_in), dim), x_in.dtype());
  const int d = check_softmax_input("log_softmax", x_in, dim);
  Tensor x = contiguous(x_in);
  Tensor y = empty(x.shape(), {x.dtype(), x.device()});
  if (x.numel() > 0) DEFINE_BACKEND_CALL("log_softmax", x, log_softmax, x, y, d);
  return y;
}

Tensor softmax_backward(const Tensor& y_in, const Tensor& dy_in, std::int64_t dim) {
  if (any_float16({y_in, dy_in}))
    return narrow(softmax_backward(widen(y_in, y_in), widen(dy_in, y_in), dim), y_in.dtype());
  const int d = check_softmax_input("softmax_backward", y_in, dim);
  check_backward_pair("softmax_backward", y_in, dy_in);
  Tensor y = contiguous(y_in), dy = contiguous(dy_in);
  Tensor dx = empty(y.shape(), {y.dtype(), y.device()});
  if (y.numel() > 0) DEFINE_BACKEND_CALL("softmax_backward", y, softmax_backward, y, dy, dx, d);
  return dx;
}

Tensor log_softmax_backward(const Tensor& y_in, const Tensor& dy_in, std::int64_t dim) {
  if (any_float16({y_in, dy_in}))
    return narrow(log_softmax_backward(widen(y_in, y_in), widen(dy_in, y_in), dim), y_in.dtype());
  const int d = check_softmax_input("log_softmax_backward", y_in, dim);
  check_backward_pair("log_softmax_backward", y_in, dy_in);
  Tensor y = contiguous(y_in), dy = contiguous(dy_in);
  Tensor dx = empty(y.shape(), {y.dtype(), y.device()});
  if (y.numel() > 0) DEFINE_BACKEND_CALL("log_softmax_backward", y, log_softmax_backward, y, dy, dx, d);
  return dx;
}

void check_targets(const char* op, const Tensor& target, std::int64_t classes, std::int64_t ignore_index) {
  // CPU targets are validated before any kernel runs: CPU kernels cannot throw from parallel
  // regions, and a bad class id would read out of bounds. Device targets are checked by the CUDA
  // loss kernels themselves (kernels/cuda/index_error.h), without a copy to the host.
  if (!target.device().is_cpu()) return;
  const Tensor host = contiguous(target);
  DEFINE_DISPATCH_INDEX(host.dtype(), op, [&] {
    const scalar_t* t = host.data<scalar_t>();
    for (std::int64_t i = 0; i < host.numel(); ++i) {
      const std::int64_t c = t[i];
      if (c != ignore_index && (c < 0 || c >= classes))
        fail(op, "target {} out of range for {} classes", c, classes);
    }
  });
}

CrossEntropyRows cross_entropy_rows(const Tensor& logits_in, const Tensor& target_in, std::int64_t ignore_index,
                                    double label_smoothing) {
  if (any_float16({logits_in})) {  // the losses and log-sum-exps stay float32
    CrossEntropyRows r = cross_entropy_rows(widen(logits_in, logits_in), target_in, ignore_index, label_smoothing);
    return {narrow(r.loss, DType::Float32), narrow(r.lse, DType::Float32)};
  }
  const char* op = "cross_entropy";
  check_loss_inputs(op, logits_in, target_in);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    fail(op, "label_smoothing {} is outside [0, 1]", label_smoothing);
  const std::int64_t rows = logits_in.size(0), classes = logits_in.size(1);
  if (classes == 0 && rows > 0) fail(op, "logits of shape {} have no classes", shape_str(logits_in.shape()));
  check_targets(op, target_in, classes, ignore_index);
  Tensor logits = contiguous(logits_in), target = contiguous(target_in);
  CrossEntropyRows r{empty({rows}, {logits.dtype(), logits.device()}), empty({rows}, {logits.dtype(), logits.device()})};
  if (rows > 0)
    DEFINE_BACKEND_CALL(op, logits, cross_entropy_rows, logits, target, r.loss, r.lse, ignore_index, label_smoothing);
  return r;
}

Tensor nll_rows(const Tensor& log_probs_in, const Tensor& target_in, std::int64_t ignore_index, const char* op) {
  if (any_float16({log_probs_in}))
    return narrow(nll_rows(widen(log_probs_in, log_probs_in), target_in, ignore_index, op), DType::Float32);
  check_loss_inputs(op, log_probs_in, target_in);
  check_targets(op, target_in, log_probs_in.size(1), ignore_index);
  Tensor log_probs = contiguous(log_probs_in), target = contiguous(target_in);
  Tensor loss = empty({log_probs.size(0)}, {log_probs.dtype(), log_probs.device()});
  if (log_probs.size(0) > 0) DEFINE_BACKEND_CALL(op, log_probs, nll_rows, log_probs, target, loss, ignore_index);
  return loss;
}

ReducedLoss reduce_loss_rows(const Tensor& rows_in, const Tensor& target_in, std::int64_t ignore_index, bool mean) {
  if (any_float16({rows_in})) {
    ReducedLoss r = reduce_loss_rows(widen(rows_in, rows_in), target_in, ignore_index, mean);
    return {narrow(r.loss, DType::Float32), narrow(r.total_weight, DType::Float32)};
  }
  const char* op = "reduce_loss_rows";
  check_floating(op, rows_in);
  check_index(op, target_in);
  check_same_device(op, {rows_in, target_in});
  if (rows_in.dim() != 1 || target_in.shape() != rows_in.shape())
    fail(op, "per-row losses {} and targets {} must be matching 1-d tensors", shape_str(rows_in.shape()),
         shape_str(target_in.shape()));
  Tensor rows = contiguous(rows_in), target = contiguous(target_in);
  ReducedLoss r{empty({}, {rows.dtype(), rows.device()}), empty({}, {rows.dtype(), rows.device()})};
  // Runs even for zero rows: the kernel writes the empty sum (0) and weight (0 for a mean).
  DEFINE_BACKEND_CALL(op, rows, reduce_loss_rows, rows, target, r.loss, r.total_weight, ignore_index, mean);
  return r;
}

Tensor cross_entropy_backward(const Tensor& logits_in, const Tensor& lse_in, const Tensor& target_in,
                              const Tensor& grad_loss_in, const Tensor& total_weight, std::int64_t ignore_index,
                              double label_smoothing) {
  if (any_float16({logits_in}))
    return narrow(cross_entropy_backward(widen(logits_in, logits_in), widen(lse_in, logits_in), target_in,
                                         widen(grad_loss_in, logits_in), widen(total_weight, logits_in), ignore_index,
                                         label_smoothing),
                  logits_in.dtype());
  const char* op = "cross_entropy_backward";
  check_loss_inputs(op, logits_in, target_in);
  check_same_device(op, {logits_in, lse_in, grad_loss_in, total_weight});
  const std::int64_t rows = logits_in.size(0);
  if (lse_in.shape() != Shape{rows} || lse_in.dtype() != logits_in.dtype())
    fail(op, "lse of shape {} does not match logits of shape {}", shape_str(lse_in.shape()),
         shape_str(logits_in.shape()));
  check_loss_grad(op, grad_loss_in, total_weight, rows, logits_in.dtype());
  Tensor logits = contiguous(logits_in), lse = contiguous(lse_in), target = contiguous(target_in);
  Tensor grad_loss = contiguous(grad_loss_in);
  Tensor grad_logits = empty(logits.shape(), {logits.dtype(), logits.device()});
  if (logits.numel() > 0)
    DEFINE_BACKEND_CALL(op, logits, cross_entropy_backward, logits, lse, target, grad_loss, total_weight, grad_logits,
                        ignore_index, label_smoothing);
  return grad_logits;
}

Tensor nll_backward(const Shape& log_probs_shape, const Tensor& target_in, const Tensor& grad_loss_in,
                    const Tensor& total_weight, std::int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  check_index(op, target_in);
  check_same_device(op, {target_in, grad_loss_in, total_weight});
  if (log_probs_shape.size() != 2 || target_in.shape() != Shape{log_probs_shape[0]})
    fail(op, "target of shape {} does not match input of shape {}", shape_str(target_in.shape()),
         shape_str(log_probs_shape));
  check_floating(op, grad_loss_in);
  check_loss_grad(op, grad_loss_in, total_weight, log_probs_shape[0], grad_loss_in.dtype());
  Tensor target = contiguous(target_in), grad_loss = contiguous(grad_loss_in);
  Tensor grad = empty(log_probs_shape, {grad_loss.dtype(), grad_loss.device()});
  if (grad.numel() > 0)
    DEFINE_BACKEND_CALL(op, grad, nll_backward, target, grad_loss, total_weight, grad, ignore_index);
  return grad;
}

}  // namespace define::kernels
