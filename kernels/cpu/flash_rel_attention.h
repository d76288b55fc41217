// CPU fused relative-attention kernels: the CPU keeps its own (unfused) relative attention,
// kernels/rel_attention.h, and these delegate to it: the forward is the unfused forward plus one
// pass for the rows' log-sum-exp, the backward recomputes P and runs the unfused backward. Same
// results as the unfused path, dropout mask included. Called by kernels/flash_rel_attention.cpp;
// the arguments and layouts are the family's backend contract, kernels/contracts/flash_rel_attention.inc.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

#include "kernels/contracts/flash_rel_attention.inc"

}  // namespace define::kernels::cpu
