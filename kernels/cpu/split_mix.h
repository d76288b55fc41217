// Fast CPU split-mix kernels: per row, memcpy of the contiguous chunks, and a small unrolled
// transpose or a strided gather for the shuffled y chunks; OpenMP over rows.
// Called by kernels/split_mix.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/split_mix.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/split_mix.inc"

}  // namespace define::kernels::cpu
