// Fast CPU copy kernels: memcpy for contiguous same-dtype copies, flat OpenMP loops the compiler
// vectorises for contiguous casts and accumulations, the strided loop for everything else.
// Called by kernels/copy.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/copy.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/copy.inc"

}  // namespace define::kernels::cpu
