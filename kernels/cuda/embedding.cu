// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  fail("embedding", "CUDA kernel not written yet");
}

void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight, std::int64_t padding_idx) {
  fail("embedding_backward", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
