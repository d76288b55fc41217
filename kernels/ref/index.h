// Reference indexing kernels: one element at a time by coordinates, sums in double.
// Called by kernels/index.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/index.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/index.inc"

}  // namespace define::kernels::ref
