// Reference layer-norm kernels: plain loops accumulating in double (the oracle).
// Called by kernels/layer_norm.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/layer_norm.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/layer_norm.inc"

}  // namespace define::kernels::ref
