// What one attention call asks of the kernels, read from its AttentionOptions the same way by
// scaled_dot_product_attention (autograd/attention.cpp) and flash_attention
// (autograd/flash_attention.cpp), so that both draw the same dropout stream from the same
// generator state and give the same result.
#pragma once

#include "autograd/attention.h"
#include "autograd/rel_attention.h"
#include "kernels/attention.h"
#include "kernels/rel_attention.h"

namespace define::detail {

struct AttentionCall {
  kernels::AttentionMasking masking;  // the masks, and the dropout stream reserved for this call
  double scale = 0.0;                 // options.scale, or 1 / sqrt(d)
};

// Checks the dropout probability and the default scale's d (naming `op`); reserves one Philox word
// per element of the [B, H, Tq, Tk] probabilities when dropout is on (none when p is 0 or 1, as
// dropout() does). Shapes, dtypes and devices are left to the kernels' entry points.
AttentionCall read_attention_call(const char* op, const Tensor& q, const Tensor& k, const AttentionOptions& options);

// The same for relative_attention (autograd/rel_attention.cpp) and flash_relative_attention
// (autograd/flash_rel_attention.cpp): the kernels' params, the dropout stream reserved.
kernels::RelAttentionParams read_rel_attention_call(const char* op, const Tensor& q, const Tensor& k,
                                                    const RelAttentionOptions& options);

// Which kernels a call asking for `requested` runs: Auto defers to default_attention_kernel(), and
// Auto there to the fused kernels when they take q and v (a cuda or emu device, float32 or 16-bit,
// head dims 1 to 128), else Unfused.
AttentionKernel resolve_attention_kernel(AttentionKernel requested, const Tensor& q, const Tensor& v);

}  // namespace define::detail
