// Reference embedding kernels: one row at a time, sums in increasing position order.
// Called by kernels/embedding.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/embedding.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/embedding.inc"

}  // namespace define::kernels::ref
