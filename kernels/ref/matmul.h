// Reference matmul kernels: plain loops accumulating in double, the oracle for the others.
// Called by kernels/matmul.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/matmul.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/matmul.inc"

}  // namespace define::kernels::ref
