// Fast CPU LSTM recurrence: all T steps of kernels/lstm.h's layer after the input projection,
// forward and backward, with the recurrent GEMM and the cell fused per step (see lstm.cpp).
// Called by kernels/lstm.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/lstm.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/lstm.inc"

}  // namespace define::kernels::cpu
