// Reference dropout kernel: one philox::random_u32 call per element, the contract verbatim.
// Called by kernels/dropout.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/dropout.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/dropout.inc"

}  // namespace define::kernels::ref
