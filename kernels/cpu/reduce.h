// Fast CPU reductions: the input is made contiguous, its dims are merged into alternating
// kept/reduced groups, and the common layouts (rows: reduce trailing dims; columns: reduce
// leading or middle dims) get dedicated OpenMP loops; other layouts are permuted into rows.
// Called by kernels/reduce.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/reduce.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/reduce.inc"

}  // namespace define::kernels::cpu
