// Reference matmul kernels: plain loops accumulating in double, the oracle for the others.
// Arguments are validated and outputs allocated by the entry points in kernels/matmul.h.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
          double beta);
void column_sum(const Tensor& x, const Tensor& out);

}  // namespace define::kernels::ref
