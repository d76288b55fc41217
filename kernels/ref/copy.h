// Reference copy kernels: one element at a time through double, in row-major order.
// Called by kernels/copy.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/copy.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/copy.inc"

}  // namespace define::kernels::ref
