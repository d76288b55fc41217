// Fast CPU attention row kernels: OpenMP over the rows of the [B*H*Tq, Tk] score matrix, each row
// in a few vectorisable passes (masked copy, max, exp + sum, normalise + dropout), the dropout
// words of a row computed lane-wise in groups of Philox blocks. Bit-identical dropout masks to the
// reference; values within rounding of it.
// Called by kernels/attention.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/attention.inc"

}  // namespace define::kernels::cpu
