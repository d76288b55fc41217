// The output layer and its loss as one differentiable op, with its backward formula beside it.
// Forward and backward go to the kernels of kernels/linear_cross_entropy.h (fused on the fast CPU
// backend, composed from the softmax and matmul families elsewhere); the reduction over rows is
// the one the softmax-family losses use (detail::reduce_rows, autograd/softmax.cpp). First
// derivatives only, like cross_entropy.
#include "autograd/linear_cross_entropy.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/views.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/linear_cross_entropy.h"

namespace define {

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const Tensor& target,
                            std::int64_t ignore_index, double label_smoothing, Reduction reduction,
                            Tensor* unsmoothed) {
  const Tensor x = autocast::gemm_input(x_in);
  const Tensor weight = autocast::gemm_input(weight_in);
  const Tensor bias = autocast::gemm_input(bias_in);
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
  Tensor loss = detail::reduce_rows(r.loss, t1, ignore_index, reduction, total_weight);
  if (unsmoothed) {
    Tensor unused;
    *unsmoothed = detail::reduce_rows(r.nll, t1, ignore_index, reduction, unused).alias();  // never the graph's output
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

}  // namespace define
