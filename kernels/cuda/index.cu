// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void gather(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  fail("gather", "CUDA kernel not written yet");
}

void scatter_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  fail("scatter_add", "CUDA kernel not written yet");
}

void index_select(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  fail("index_select", "CUDA kernel not written yet");
}

void index_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  fail("index_add", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
