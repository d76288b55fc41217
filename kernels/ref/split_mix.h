// Reference split-mix kernels: the definition of kernels/split_mix.h written out literally, one
// row at a time (shuffle y into a row buffer, then copy the chunks pair by pair).
// Called by kernels/split_mix.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/split_mix.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/split_mix.inc"

}  // namespace define::kernels::ref
