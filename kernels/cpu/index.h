// Fast CPU indexing kernels: [outer, dim, inner] loops over contiguous data, OpenMP.
// Called by kernels/index.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/index.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/index.inc"

}  // namespace define::kernels::cpu
