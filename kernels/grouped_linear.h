// Group linear transform (GLT) of DeFINE / DExTra (docs/spec.md section 1): the input's
// last dim is cut into g contiguous chunks of k_in features, chunk i goes through its own
// [k_in, k_out] matrix and bias, and the g results are concatenated group-major (no shuffle; the
// channel shuffle belongs to the split-mix op):
//   y[t, i*k_out + j] = sum_c x[t, i*k_in + c] * weight[i, c, j] + bias[i, j]
// Every backend computes all groups as one batched ("grouped") GEMM.
// Reference: kernels/ref/grouped_linear.cpp; fast path: kernels/cpu/grouped_linear.cpp; CUDA:
// kernels/cuda/grouped_linear.cu.
#pragma once

#include "core/tensor.h"

namespace define::kernels {

// x [..., g*k_in], weight [g, k_in, k_out], bias [g, k_out] or undefined -> y [..., g*k_out].
Tensor grouped_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Gradients of grouped_linear for the upstream gradient dy [..., g*k_out]; each is computed only
// when its flag is set (undefined otherwise). Per group i, with rows t over all leading dims:
//   dx_i = dy_i @ weight_i^T,  dweight_i = x_i^T @ dy_i,  dbias_i = column sums of dy_i.
// dweight and dbias are sums over rows in an order that depends only on the shapes: the same
// bits for any thread count or block schedule on a given backend. x is read only for dweight: it
// may be undefined when need_dweight is false (its shape is dy's with g*k_in features).
struct GroupedLinearGrads {
  Tensor dx, dweight, dbias;
};
GroupedLinearGrads grouped_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, bool need_dx,
                                           bool need_dweight, bool need_dbias);

}  // namespace define::kernels
