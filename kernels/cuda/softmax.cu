// TEMPORARY stub (work in progress): replaced by the real kernels before this lands.
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {

void softmax(const Tensor& x, const Tensor& y, int dim) {
  fail("softmax", "CUDA kernel not written yet");
}

void log_softmax(const Tensor& x, const Tensor& y, int dim) {
  fail("log_softmax", "CUDA kernel not written yet");
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  fail("softmax_backward", "CUDA kernel not written yet");
}

void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim) {
  fail("log_softmax_backward", "CUDA kernel not written yet");
}

void cross_entropy_rows(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse, std::int64_t ignore_index, double label_smoothing) {
  fail("cross_entropy_rows", "CUDA kernel not written yet");
}

void nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& loss, std::int64_t ignore_index) {
  fail("nll_rows", "CUDA kernel not written yet");
}

void reduce_loss_rows(const Tensor& rows, const Tensor& target, const Tensor& loss, const Tensor& total_weight, std::int64_t ignore_index, bool mean) {
  fail("reduce_loss_rows", "CUDA kernel not written yet");
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_logits, std::int64_t ignore_index, double label_smoothing) {
  fail("cross_entropy_backward", "CUDA kernel not written yet");
}

void nll_backward(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight, const Tensor& grad_log_probs, std::int64_t ignore_index) {
  fail("nll_backward", "CUDA kernel not written yet");
}

}  // namespace define::kernels::DEFINE_CUDA_NS
