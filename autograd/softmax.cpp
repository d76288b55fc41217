// Softmax family forward passes with their backward formulas beside them. Backward closures call
// the fused kernels directly (kernels/softmax.h); they are not themselves differentiable, so
// these ops support first derivatives only.
#include "autograd/softmax.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factory.h"
#include "kernels/softmax.h"

namespace define {

Tensor softmax(const Tensor& x_in, std::int64_t dim) {
  const Tensor x = autocast::float_input(x_in);
  Tensor y = kernels::softmax(x, dim);
  if (needs_grad({x})) {
    // dx = y * (dy - sum(dy * y)) along dim: the Jacobian diag(y) - y y^T applied to dy.
    record("softmax", {x}, {y}, [sy = SavedTensor(y), dim](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::softmax_backward(sy.get("softmax"), a.grad(), dim)};
    });
  }
  return y;
}

Tensor log_softmax(const Tensor& x_in, std::int64_t dim) {
  const Tensor x = autocast::float_input(x_in);
  Tensor y = kernels::log_softmax(x, dim);
  if (needs_grad({x})) {
    // dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y).
    record("log_softmax", {x}, {y}, [sy = SavedTensor(y), dim](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::log_softmax_backward(sy.get("log_softmax"), a.grad(), dim)};
    });
  }
  return y;
}

namespace detail {

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

}  // namespace detail

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, std::int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  const Tensor logits = autocast::float_input(logits_in);
  kernels::CrossEntropyRows rows = kernels::cross_entropy_rows(logits, target, ignore_index, label_smoothing);
  Tensor total_weight;
  Tensor loss = detail::reduce_rows(rows.loss, target, ignore_index, reduction, total_weight);
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

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target, std::int64_t ignore_index, Reduction reduction) {
  const Tensor log_probs = autocast::float_input(log_probs_in);
  Tensor rows = kernels::nll_rows(log_probs, target, ignore_index);
  Tensor total_weight;
  Tensor loss = detail::reduce_rows(rows, target, ignore_index, reduction, total_weight);
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
