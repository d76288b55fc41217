// Fast CPU adaptive-softmax kernels: OpenMP over rows, vectorisable lane-split reductions and a
// polynomial float32 exp (see the .cpp).
// Called by kernels/adaptive_softmax.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/adaptive_softmax.inc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/adaptive_softmax.inc"

}  // namespace define::kernels::cpu
