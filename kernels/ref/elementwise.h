// Reference elementwise kernels: every element computed in double with the textbook formula,
// one at a time, in row-major order. Slow on purpose; the oracle for the cpu and cuda paths.
// Called by kernels/elementwise.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/elementwise.inc.
#pragma once

#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace define::kernels::ref {

#include "kernels/contracts/elementwise.inc"

}  // namespace define::kernels::ref
