// Reference attention row kernels: the definition of kernels/attention.h written out literally,
// one row at a time, every sum in double, one philox::random_u32 call per dropout decision.
// Called by kernels/attention.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/attention.inc"

}  // namespace define::kernels::ref
