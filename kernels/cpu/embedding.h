// Fast CPU embedding kernels: OpenMP over rows of the lookup; a deterministic backward.
// Called by kernels/embedding.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/embedding.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/embedding.inc"

}  // namespace define::kernels::cpu
