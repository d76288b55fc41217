// Adaptive-softmax ops with their backward beside them. The backward closures call the fused
// kernels directly (first derivatives only, like the softmax family).
#include "autograd/adaptive_softmax.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factory.h"
#include "kernels/softmax.h"

namespace define {
namespace {

std::vector<Tensor> saved_all(const std::vector<SavedTensor>& saved, const char* op) {
  std::vector<Tensor> out;
  out.reserve(saved.size());
  for (const SavedTensor& s : saved) out.push_back(s.get(op));
  return out;
}

std::vector<SavedTensor> save_all(const std::vector<Tensor>& ts) {
  std::vector<SavedTensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.emplace_back(t);
  return out;
}

}  // namespace

AdaptivePartition adaptive_partition(const Tensor& target, const std::vector<std::int64_t>& bounds,
                                     std::int64_t ignore_index) {
  return kernels::adaptive_partition(target, bounds, ignore_index);
}

Tensor adaptive_softmax_loss(const Tensor& head_in, const std::vector<Tensor>& tails_in,
                             const std::vector<Tensor>& tail_rows, const Tensor& target,
                             const std::vector<std::int64_t>& bounds, std::int64_t ignore_index, Reduction reduction) {
  const Tensor head = autocast::float_input(head_in);
  std::vector<Tensor> tails;
  for (const Tensor& t : tails_in) tails.push_back(autocast::float_input(t));
  kernels::AdaptiveSoftmaxRows rows = kernels::adaptive_softmax_rows(head, tails, tail_rows, target, bounds, ignore_index);
  Tensor total_weight, loss;
  if (reduction == Reduction::None) {
    total_weight = ones({}, {rows.loss.dtype(), rows.loss.device()});
    loss = rows.loss;
  } else {
    kernels::ReducedLoss r = kernels::reduce_loss_rows(rows.loss, target, ignore_index, reduction == Reduction::Mean);
    total_weight = r.total_weight;
    loss = r.loss;
  }
  std::vector<Tensor> inputs{head};
  inputs.insert(inputs.end(), tails.begin(), tails.end());
  if (needs_grad(inputs)) {
    inputs.push_back(target);  // class indices: recorded for the graph's shape checks, never differentiated
    // d loss / d head_r = s_r (softmax(head_r) - onehot(slot_r)), d loss / d tail_i[k] = s_r
    // (softmax(tail_i[k]) - onehot(t_r - c_i)), s_r = g_r / w, from the saved log-sum-exps.
    kernels::AdaptiveSoftmaxRows stats{Tensor(), rows.head_lse, rows.tail_lse};
    record("adaptive_softmax_loss", inputs, {loss},
           [sh = SavedTensor(head), st = save_all(tails), rows_ = tail_rows, tgt = SavedTensor(target), stats, bounds,
            total_weight, ignore_index](const BackwardArgs& a) {
             const char* op = "adaptive_softmax_loss";
             kernels::AdaptiveSoftmaxGrads g =
                 kernels::adaptive_softmax_backward(sh.get(op), saved_all(st, op), stats, rows_, tgt.get(op), bounds,
                                                    a.grad(), total_weight, ignore_index);
             std::vector<Tensor> grads{a.needs(0) ? g.grad_head : Tensor()};
             for (std::size_t i = 0; i < g.grad_tails.size(); ++i)
               grads.push_back(a.needs(i + 1) ? g.grad_tails[i] : Tensor());
             grads.emplace_back();  // target
             return grads;
           });
  }
  return loss;
}

Tensor adaptive_log_softmax(const Tensor& head_in, const std::vector<Tensor>& tails_in,
                            const std::vector<std::int64_t>& bounds) {
  const Tensor head = autocast::float_input(head_in);
  std::vector<Tensor> tails;
  for (const Tensor& t : tails_in) tails.push_back(autocast::float_input(t));
  kernels::AdaptiveLogProb lp = kernels::adaptive_log_prob(head, tails, bounds);
  std::vector<Tensor> inputs{head};
  inputs.insert(inputs.end(), tails.begin(), tails.end());
  if (needs_grad(inputs)) {
    // Tail block i: d tail_i = dout_i - softmax(tail_i) * rowsum(dout_i); rowsum(dout_i) flows to
    // the head's cluster column, and the head goes through log_softmax's backward.
    record("adaptive_log_softmax", inputs, {lp.out},
           [out = SavedTensor(lp.out), head_lp = lp.head_lp, bounds](const BackwardArgs& a) {
             const kernels::AdaptiveLogProb saved{out.get("adaptive_log_softmax"), head_lp};
             kernels::AdaptiveLogProbGrads g = kernels::adaptive_log_prob_backward(saved, a.grad(), bounds);
             std::vector<Tensor> grads{a.needs(0) ? g.grad_head : Tensor()};
             for (std::size_t i = 0; i < g.grad_tails.size(); ++i)
               grads.push_back(a.needs(i + 1) ? g.grad_tails[i] : Tensor());
             return grads;
           });
  }
  return lp.out;
}

}  // namespace define
