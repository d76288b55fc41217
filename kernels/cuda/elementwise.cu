// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void unary(const Tensor& x, const Tensor& out, UnaryOp op, double p0, double p1) {
  fail("unary", "CUDA kernel not written yet");
}

void binary(const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp op, double p0, double p1) {
  fail("binary", "CUDA kernel not written yet");
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  fail("where", "CUDA kernel not written yet");
}

void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  fail("masked_fill", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
