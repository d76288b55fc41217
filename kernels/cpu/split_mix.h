// Fast CPU split-mix kernels: per row, memcpy of the contiguous chunks, and a small unrolled
// transpose or a strided gather for the shuffled y chunks; OpenMP over rows. Called by
// kernels/split_mix.cpp with 2-d operands: x [T, p], y [T, q], grad_out [T, p + q] with any
// strides; out, grad_x, grad_y contiguous; shuffle_groups >= 1 (1: no shuffle).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

void split_mix(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t groups, std::int64_t shuffle_groups);
void split_mix_backward(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t groups,
                        std::int64_t shuffle_groups);

}  // namespace define::kernels::cpu
