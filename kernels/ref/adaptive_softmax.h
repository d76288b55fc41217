// Reference adaptive-softmax kernels: the definitions of kernels/adaptive_softmax.h written out
// literally with every sum in double (max, then sum of exp(x - max)), one row at a time. The
// oracle for the fast CPU path and the CUDA kernels.
// Called by kernels/adaptive_softmax.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/adaptive_softmax.inc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/adaptive_softmax.inc"

}  // namespace define::kernels::ref
