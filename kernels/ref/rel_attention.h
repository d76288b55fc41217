// Reference relative-attention row kernels: the definition of kernels/rel_attention.h written out
// literally, one row at a time, every sum in double, one philox::random_u32 call per dropout
// decision.
// Called by kernels/rel_attention.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/rel_attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/rel_attention.inc"

}  // namespace define::kernels::ref
