// The argument checks and the padding-mask form that the two scaled dot-product attention families
// share (kernels/attention.cpp, the unfused one, defines them; kernels/flash_attention.cpp calls
// them), so both refuse the same inputs with the same words.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/attention.h"

namespace define::kernels::attention_checks {

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv]: defined, 4-d, matching, one float dtype and device.
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v);
void check_scale(const char* op, double scale);
void check_dropout(const char* op, double p);
// The dropout probability and the padding mask's shape [B, Tk].
void check_masking(const char* op, std::int64_t batch, std::int64_t keys, const AttentionMasking& m);
// The padding mask as the backends read it: int32 0/1, contiguous, on `device`. Any dtype is
// accepted, so "nonzero" is decided before the cast (a float 0.5 is padding, not 0).
Tensor canonical_padding(const Tensor& pad, Device device);

}  // namespace define::kernels::attention_checks
