#include "kernels/linear_cross_entropy.h"

#include "core/error.h"
#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/linear_cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/softmax.h"

namespace define::kernels {
namespace {

void check_layer(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target) {
  check_floating(op, x);
  check_dim(op, x, 2);
  check_dim(op, weight, 2);
  check_index(op, target);
  check_same_device(op, {x, weight, bias, target});
  check_same_dtype(op, {x, weight, bias});
  if (weight.size(1) != x.size(1))
    fail(op, "input {} has {} features but weight {} expects {}", shape_str(x.shape()), x.size(1),
         shape_str(weight.shape()), weight.size(1));
  if (bias.defined() && bias.shape() != Shape{weight.size(0)})
    fail(op, "bias shape {} does not match [{}] (weight {})", shape_str(bias.shape()), weight.size(0),
         shape_str(weight.shape()));
  if (target.dim() != 1 || target.size(0) != x.size(0))
    fail(op, "target of shape {} does not match input of shape {} (expected [{}])", shape_str(target.shape()),
         shape_str(x.shape()), x.size(0));
}

// The fused kernel serves the fast CPU backend; everything else composes the family kernels.
bool fused(const Tensor& x) { return backend_for(x) == Backend::Cpu; }

}  // namespace

LinearCrossEntropyRows linear_cross_entropy_rows(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                                                 const Tensor& target_in, std::int64_t ignore_index,
                                                 double label_smoothing, bool with_nll) {
  const char* op = "linear_cross_entropy";
  if (any_float16({x_in, weight_in, bias_in})) {
    // Widened; what backward reads comes back in x's dtype, the row statistics in float32.
    LinearCrossEntropyRows r = linear_cross_entropy_rows(widen(x_in, x_in), widen(weight_in, x_in),
                                                         widen(bias_in, x_in), target_in, ignore_index,
                                                         label_smoothing, with_nll);
    return {narrow(r.saved, x_in.dtype()), narrow(r.row_max, DType::Float32), narrow(r.loss, DType::Float32),
            narrow(r.lse, DType::Float32), narrow(r.nll, DType::Float32)};
  }
  check_layer(op, x_in, weight_in, bias_in, target_in);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    fail(op, "label_smoothing {} is outside [0, 1]", label_smoothing);
  const std::int64_t rows = x_in.size(0), classes = weight_in.size(0);
  if (classes == 0 && rows > 0) fail(op, "weight of shape {} has no classes", shape_str(weight_in.shape()));
  check_targets(op, target_in, classes, ignore_index);
  const Tensor x = contiguous(x_in), weight = contiguous(weight_in), target = contiguous(target_in);
  const Tensor bias = bias_in.defined() ? contiguous(bias_in) : Tensor();
  const TensorOptions opt{x.dtype(), x.device()};
  LinearCrossEntropyRows r;
  r.saved = empty({rows, classes}, opt);
  if (!fused(x)) {
    const Tensor& logits = r.saved;
    if (bias.defined()) copy_into(logits, bias);  // broadcast rows; the GEMM adds onto them
    gemm(x, weight, logits, false, true, 1.0, bias.defined() ? 1.0 : 0.0);
    CrossEntropyRows ce = cross_entropy_rows(logits, target, ignore_index, label_smoothing);
    r.loss = ce.loss;
    r.lse = ce.lse;
    if (with_nll) r.nll = label_smoothing == 0.0 ? r.loss : cross_entropy_rows(logits, target, ignore_index, 0.0).loss;
    return r;
  }
  r.row_max = empty({rows}, opt);
  r.loss = empty({rows}, opt);
  r.lse = empty({rows}, opt);
  if (with_nll) r.nll = empty({rows}, opt);
  if (rows > 0)
    cpu::linear_cross_entropy_rows(x, weight, bias, target, r.saved, r.row_max, r.loss, r.lse, r.nll, ignore_index,
                                   label_smoothing);
  return r;
}

LinearCrossEntropyGrads linear_cross_entropy_backward(const Tensor& x_in, const Tensor& weight_in,
                                                      const Tensor& saved_in, const Tensor& row_max_in,
                                                      const Tensor& lse_in, const Tensor& target_in,
                                                      const Tensor& grad_loss_in, const Tensor& total_weight,
                                                      std::int64_t ignore_index, double label_smoothing, bool need_x,
                                                      bool need_weight, bool need_bias) {
  const char* op = "linear_cross_entropy_backward";
  if (any_float16({x_in, weight_in, saved_in})) {
    LinearCrossEntropyGrads g = linear_cross_entropy_backward(
        widen(x_in, x_in), widen(weight_in, x_in), widen(saved_in, x_in), widen(row_max_in, x_in), widen(lse_in, x_in),
        target_in, widen(grad_loss_in, x_in), widen(total_weight, x_in), ignore_index, label_smoothing, need_x,
        need_weight, need_bias);
    return {narrow(g.x, x_in.dtype()), narrow(g.weight, weight_in.dtype()), narrow(g.bias, weight_in.dtype())};
  }
  check_layer(op, x_in, weight_in, Tensor(), target_in);
  const std::int64_t rows = x_in.size(0), classes = weight_in.size(0);
  if (saved_in.shape() != Shape{rows, classes} || lse_in.shape() != Shape{rows})
    fail(op, "saved rows {} and lse {} do not match {} rows of {} classes", shape_str(saved_in.shape()),
         shape_str(lse_in.shape()), rows, classes);
  // What the forward saved decides: the composed forward saved logits, the fused one exponentials.
  if (!row_max_in.defined()) {
    const Tensor g =
        cross_entropy_backward(saved_in, lse_in, target_in, grad_loss_in, total_weight, ignore_index, label_smoothing);
    LinearCrossEntropyGrads d;
    if (need_x) d.x = matmul(g, weight_in);
    if (need_weight) d.weight = matmul(g, x_in, true, false);
    if (need_bias) d.bias = column_sum(g);
    return d;
  }
  check_same_device(op, {x_in, saved_in, row_max_in, lse_in, grad_loss_in, total_weight});
  if (!x_in.device().is_cpu()) fail(op, "the fused CPU kernel's saved rows are on {}", x_in.device().str());
  if (row_max_in.shape() != Shape{rows})
    fail(op, "saved row maxima {} do not match {} rows", shape_str(row_max_in.shape()), rows);
  if (grad_loss_in.numel() != 1 && grad_loss_in.shape() != Shape{rows})
    fail(op, "loss gradient of shape {} is neither a scalar nor [{}]", shape_str(grad_loss_in.shape()), rows);
  if (total_weight.numel() != 1) fail(op, "total_weight must have one element, got {}", shape_str(total_weight.shape()));
  for (const Tensor* t : {&saved_in, &row_max_in, &lse_in, &grad_loss_in, &total_weight})
    if (t->dtype() != x_in.dtype())
      fail(op, "saved rows, row maxima, lse, loss gradient and total_weight must be {}", dtype_name(x_in.dtype()));
  const Tensor x = contiguous(x_in), weight = contiguous(weight_in), saved = contiguous(saved_in);
  const Tensor row_max = contiguous(row_max_in), lse = contiguous(lse_in), target = contiguous(target_in);
  const Tensor grad_loss = contiguous(grad_loss_in);
  const TensorOptions opt{x.dtype(), x.device()};
  LinearCrossEntropyGrads d;
  if (need_x) d.x = empty({rows, x.size(1)}, opt);
  if (need_weight) d.weight = empty(weight.shape(), opt);
  if (need_bias) d.bias = empty({classes}, opt);
  if (rows == 0) {  // no rows, no gradient: dx is empty, dW and db are zero
    if (need_weight) d.weight = zeros(weight.shape(), opt);
    if (need_bias) d.bias = zeros({classes}, opt);
    return d;
  }
  cpu::linear_cross_entropy_backward(x, weight, saved, row_max, lse, target, grad_loss, total_weight, d.x, d.weight,
                                     d.bias, ignore_index, label_smoothing);
  return d;
}

}  // namespace define::kernels
