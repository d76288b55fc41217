// Reference fused relative-attention kernels: the definition of kernels/flash_rel_attention.h
// written out literally, one query row at a time, every sum in double, one philox::random_u32 call
// per dropout decision. The backward recomputes each row's probabilities from q, k, r, u and w (it
// reads neither out nor lse), so it is an oracle for the fused backends' use of them. Called by
// kernels/flash_rel_attention.cpp; the arguments and layouts are the family's backend contract,
// kernels/contracts/flash_rel_attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::ref {

#include "kernels/contracts/flash_rel_attention.inc"

}  // namespace define::kernels::ref
