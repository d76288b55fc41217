// Softmax family forward passes with their backward formulas beside them. Backward closures call
// the fused kernels directly (kernels/softmax.h); they are not themselves differentiable, so
// these ops support first derivatives only.
#include "autograd/softmax.h"

#include "autograd/function.h"
#include "autograd/views.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/linear_cross_entropy.h"
#include "kernels/softmax.h"

namespace define {

Tensor softmax(const Tensor& x, std::int64_t dim) {
  Tensor y = kernels::softmax(x, dim);
  if (needs_grad({x})) {
    // dx = y * (dy - sum(dy * y)) along dim: the Jacobian diag(y) - y y^T applied to dy.
    record("softmax", {x}, {y}, [sy = SavedTensor(y), dim](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::softmax_backward(sy.get("softmax"), a.grad(), dim)};
    });
  }
  return y;
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  Tensor y = kernels::log_softmax(x, dim);
  if (needs_grad({x})) {
    // dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y).
    record("log_softmax", {x}, {y}, [sy = SavedTensor(y), dim](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::log_softmax_backward(sy.get("log_softmax"), a.grad(), dim)};
    });
  }
  return y;
}

namespace {

// Applies `reduction` to per-row losses. total_weight receives what the backward pass divides
// by: the non-ignored row count for a mean, 1 otherwise (a scalar tensor in every case).
Tensor reduce_rows(const Tensor& rows, const Tensor& target, std::int64_t ignore_index, Reduction reduction,
                   Tensor& total_weight) {
  if (reduction == Reduction::None) {
    total_weight = ones({}, {rows.dtype(), rows.device()});
    return rows;
  }
  kernels::ReducedLoss r = kernels::reduce_loss_rows(rows, target, ignore_index, reduction == Reduction::Mean);
  total_weight = r.total_weight;
  return r.loss;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  kernels::CrossEntropyRows rows = kernels::cross_entropy_rows(logits, target, ignore_index, label_smoothing);
  Tensor total_weight;
  Tensor loss = reduce_rows(rows.loss, target, ignore_index, reduction, total_weight);
  if (needs_grad({logits})) {
    // d loss / d logits_i = g_i / w * (softmax(logits_i) - (1 - eps) * onehot(t_i) - eps / C), with
    // softmax recovered from the saved log-sum-exp in the same pass; zero rows for ignored targets.
    // target: class indices, not differentiable.
    record("cross_entropy", {logits, target}, {loss},
           [sx = SavedTensor(logits), st = SavedTensor(target), lse = rows.lse, total_weight, ignore_index,
            label_smoothing](const BackwardArgs& a) {
             Tensor dx = kernels::cross_entropy_backward(sx.get("cross_entropy"), lse, st.get("cross_entropy"),
                                                         a.grad(), total_weight, ignore_index, label_smoothing);
             return std::vector<Tensor>{dx, Tensor()};
           });
  }
  return loss;
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target,
                            std::int64_t ignore_index, double label_smoothing, Reduction reduction,
                            Tensor* unsmoothed) {
  const char* op = "linear_cross_entropy";
  if (x.dim() == 0) fail(op, "input must have at least 1 dim, got a 0-d tensor");
  const std::int64_t in = x.shape().back();
  if (Shape(target.shape()) != Shape(x.shape().begin(), x.shape().end() - 1))
    fail(op, "target of shape {} does not match input of shape {} (expected its leading dims)",
         shape_str(target.shape()), shape_str(x.shape()));
  const std::int64_t rows = target.numel();
  // Rows of one GEMM: x as [rows, in], target as [rows] (reshape: a view unless the strides need a
  // copy, and its own backward maps dx back onto x's shape).
  const Tensor x2 = reshape(x, {rows, in}), t1 = reshape(target, {rows});
  kernels::LinearCrossEntropyRows r = kernels::linear_cross_entropy_rows(x2, weight, bias, t1, ignore_index,
                                                                         label_smoothing, unsmoothed != nullptr);
  Tensor total_weight;
  Tensor loss = reduce_rows(r.loss, t1, ignore_index, reduction, total_weight);
  if (unsmoothed) {
    Tensor unused;
    *unsmoothed = reduce_rows(r.nll, t1, ignore_index, reduction, unused).alias();  // never the graph's output
  }
  if (needs_grad({x2, weight, bias})) {
    // With g_i = d loss / d logits_i (cross_entropy's formula): dx = g W, dW = g^T x, db = column sums
    // of g; the fused kernel forms g block by block and never stores it whole.
    record(op, {x2, weight, bias, t1}, {loss},
           [op, sx = SavedTensor(x2), sw = SavedTensor(weight), saved = r.saved, row_max = r.row_max, lse = r.lse,
            st = SavedTensor(t1), total_weight, ignore_index, label_smoothing](const BackwardArgs& a) {
             kernels::LinearCrossEntropyGrads d = kernels::linear_cross_entropy_backward(
                 sx.get(op), sw.get(op), saved, row_max, lse, st.get(op), a.grad(), total_weight, ignore_index,
                 label_smoothing, a.needs(0), a.needs(1), a.needs(2));
             return std::vector<Tensor>{d.x, d.weight, d.bias, Tensor()};
           });
  }
  return loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index, Reduction reduction) {
  Tensor rows = kernels::nll_rows(log_probs, target, ignore_index);
  Tensor total_weight;
  Tensor loss = reduce_rows(rows, target, ignore_index, reduction, total_weight);
  if (needs_grad({log_probs})) {
    // d loss / d log_probs[i, c] = -g_i / w where c = target_i, 0 elsewhere and on ignored rows.
    // target: class indices, not differentiable.
    record("nll_loss", {log_probs, target}, {loss},
           [shape = log_probs.shape(), st = SavedTensor(target), total_weight, ignore_index](const BackwardArgs& a) {
             Tensor dx = kernels::nll_backward(shape, st.get("nll_loss"), a.grad(), total_weight, ignore_index);
             return std::vector<Tensor>{dx, Tensor()};
           });
  }
  return loss;
}

}  // namespace define
