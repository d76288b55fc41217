// Reference grouped-linear kernels: plain loops accumulating in double (the oracle).
// Called by kernels/grouped_linear.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/grouped_linear.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/grouped_linear.inc"

}  // namespace define::kernels::ref
