// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void sum(const Tensor& x, const Tensor& out, double scale) {
  fail("sum", "CUDA kernel not written yet");
}

void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim) {
  fail("max", "CUDA kernel not written yet");
}

void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  fail("max_backward", "CUDA kernel not written yet");
}

void column_sum(const Tensor& x, const Tensor& out) {
  fail("column_sum", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
