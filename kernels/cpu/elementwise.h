// Fast CPU elementwise kernels: computed in the tensors' own type, with stride-1 and
// scalar-broadcast inner loops the compiler vectorises, split across OpenMP threads by element
// range once a tensor is large enough to pay for the threads.
// Called by kernels/elementwise.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/elementwise.inc.
#pragma once

#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace define::kernels::cpu {

#include "kernels/contracts/elementwise.inc"

}  // namespace define::kernels::cpu
