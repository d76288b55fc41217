// Dropout family: inverted dropout driven by the counter-based Philox stream.
//
// The contract every backend reproduces bit for bit: element i of the contiguous output is kept
// iff philox::u32_to_unit_float(philox::random_u32(seed, offset, i)) >= p, and a kept element
// is x_i * (1 / (1 - p)) (the scale computed in double and rounded to the tensor's dtype).
// Because the mask is a pure function of (seed, offset, i), the backward pass regenerates it:
// dx = dropout_apply(dy, p, seed, offset). No mask tensor is stored.
// Reference: kernels/ref/dropout.cpp; fast path: kernels/cpu/dropout.cpp.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

// Requires 0 <= p < 1. x is read in logical (row-major) order; the output is contiguous.
Tensor dropout_apply(const Tensor& x, double p, std::uint64_t seed, std::uint64_t offset);

// The scale of kept elements, rounded to T the way every backend applies it.
template <typename T>
T dropout_scale(double p) {
  return static_cast<T>(1.0 / (1.0 - p));
}

}  // namespace define::kernels
