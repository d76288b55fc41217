// Fast CPU relative-attention row kernels: OpenMP over the rows of the [B*H*Tq, Tk] score
// matrix; each row forms its visible scores from AC and the shifted BD in one vectorisable pass,
// then max, exp + sum, normalise and dropout as the attention family's row kernel does. Dropout
// masks bit-identical to the reference, values within rounding of it.
// Called by kernels/rel_attention.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/rel_attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/rel_attention.inc"

}  // namespace define::kernels::cpu
