// Fast CPU softmax-family kernels: OpenMP over rows, vectorisable loops, a polynomial float exp.
// Called by kernels/softmax.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/softmax.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/softmax.inc"

}  // namespace define::kernels::cpu
