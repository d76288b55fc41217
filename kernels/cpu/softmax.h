// Fast CPU softmax-family kernels: OpenMP over rows, vectorisable loops, a polynomial float exp.
// Called by kernels/softmax.cpp with contiguous inputs and preallocated contiguous outputs;
// same signatures in every backend (ref, cpu, cuda).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

void softmax(const Tensor& x, const Tensor& y, int dim);
void log_softmax(const Tensor& x, const Tensor& y, int dim);
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim);
void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int dim);

void cross_entropy_rows(const Tensor& logits, const Tensor& target, const Tensor& loss, const Tensor& lse,
                        std::int64_t ignore_index, double label_smoothing);
void nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& loss, std::int64_t ignore_index);
void reduce_loss_rows(const Tensor& rows, const Tensor& target, const Tensor& loss, const Tensor& total_weight,
                      std::int64_t ignore_index, bool mean);
void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                            const Tensor& total_weight, const Tensor& grad_logits, std::int64_t ignore_index,
                            double label_smoothing);
void nll_backward(const Tensor& target, const Tensor& grad_loss, const Tensor& total_weight,
                  const Tensor& grad_log_probs, std::int64_t ignore_index);

}  // namespace define::kernels::cpu
