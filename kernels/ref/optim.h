// Reference optimizer kernels: each element computed in double and rounded once. Called by
// kernels/optim.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/optim.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/optim.inc"

}  // namespace define::kernels::ref
