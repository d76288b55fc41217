// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void dropout_apply(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  fail("dropout_apply", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
