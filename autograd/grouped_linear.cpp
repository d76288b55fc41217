// Grouped linear forward with its backward formulas beside it.
#include "autograd/grouped_linear.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "kernels/grouped_linear.h"

namespace define {

Tensor grouped_linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = autocast::gemm_input(x_in);
  const Tensor weight = autocast::gemm_input(weight_in);
  const Tensor bias = autocast::gemm_input(bias_in);
  Tensor y = kernels::grouped_linear(x, weight, bias);
  if (needs_grad({x, weight, bias})) {
    // Per group i, with g = dL/dy and rows over all leading dims:
    //   dL/dx_i = g_i @ weight_i^T,  dL/dweight_i = x_i^T @ g_i,  dL/dbias_i = column sums of g_i.
    // One call computes the ones that are needed; x is kept only for dweight, weight only for dx.
    record("grouped_linear", {x, weight, bias}, {y},
           [keep_x = SavedTensor(weight.requires_grad() ? x : Tensor()),
            keep_w = SavedTensor(weight)](const BackwardArgs& a) {
             const char* op = "grouped_linear";
             const Tensor x = keep_x.defined() ? keep_x.get(op) : Tensor();  // read for dweight only
             kernels::GroupedLinearGrads g =
                 kernels::grouped_linear_backward(a.grad(), x, keep_w.get(op), a.needs(0), a.needs(1), a.needs(2));
             return std::vector<Tensor>{g.dx, g.dweight, g.dbias};
           });
  }
  return y;
}

}  // namespace define
