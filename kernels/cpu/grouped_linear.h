// Fast CPU grouped-linear kernels: one Eigen GEMM per (group, block of rows), OpenMP across them;
// deterministic dweight/dbias reductions.
// Called by kernels/grouped_linear.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/grouped_linear.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/grouped_linear.inc"

}  // namespace define::kernels::cpu
