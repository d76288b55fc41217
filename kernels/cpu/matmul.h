// Fast CPU matmul kernels: Eigen GEMM on strided maps, OpenMP over the batch for small GEMMs.
// Called by kernels/matmul.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/matmul.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/matmul.inc"

}  // namespace define::kernels::cpu
