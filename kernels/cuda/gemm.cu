// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha, double beta) {
  fail("gemm", "CUDA kernel not written yet");
}


}  // namespace define::kernels::DEFINE_CUDA_NS
