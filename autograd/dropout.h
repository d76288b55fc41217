// Dropout, differentiable.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace define {

// Inverted dropout: each element is kept with probability 1 - p and scaled by 1 / (1 - p), so the
// expected value is unchanged. Element i of the (contiguous, row-major) output uses word i of a
// range gen.reserve(numel) hands out, and is kept iff
//   philox::u32_to_unit_float(philox::random_u32(seed, offset, i)) >= p
// (the contract the CUDA kernel reproduces; see kernels/dropout.h).
// training == false or p == 0: returns x itself (no copy, no randomness drawn).
// p == 1: returns zeros (gradient zero). p outside [0, 1] is an error.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& gen = default_generator());

}  // namespace define
