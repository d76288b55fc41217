// Fast CPU optimizer kernels: one vectorised pass per parameter, a contiguous range a thread. Called by
// kernels/optim.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/optim.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/optim.inc"

}  // namespace define::kernels::cpu
