// Reference LSTM recurrence: all T steps of kernels/lstm.h's layer after the input projection,
// written out per element with every value computed in double (the recurrent products
// h_{t-1} w_hh^T and dgates w_hh summed in double, exp-based sigmoid, std::tanh) and rounded once
// when stored. The oracle for the fast CPU path (kernels/cpu/lstm.cpp) and the CUDA kernels.
// Called by kernels/lstm.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/lstm.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/lstm.inc"

}  // namespace define::kernels::ref
