// Fast CPU layer-norm kernels: OpenMP over rows; deterministic dweight/dbias reductions.
// Called by kernels/layer_norm.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/layer_norm.inc.
#pragma once

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/layer_norm.inc"

}  // namespace define::kernels::cpu
