// Reference softmax-family kernels: plain loops accumulating in double (the oracle).
// Called by kernels/softmax.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/softmax.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/softmax.inc"

}  // namespace define::kernels::ref
