// Reference reductions: one pass over the input in row-major order, accumulating in double.
// The oracle for the cpu and cuda paths.
// Called by kernels/reduce.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/reduce.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/reduce.inc"

}  // namespace define::kernels::ref
