// Fast CPU dropout kernel: one Philox block per four elements, OpenMP over blocks.
// Called by kernels/dropout.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/dropout.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/dropout.inc"

}  // namespace define::kernels::cpu
