// Reference dropout kernel: one philox::random_u32 call per element, the contract verbatim.
// Called by kernels/dropout.cpp with a contiguous input and a preallocated contiguous output.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

void dropout_apply(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset);

}  // namespace define::kernels::ref
