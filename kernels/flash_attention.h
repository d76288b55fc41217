// Flash-attention family: scaled dot-product attention fused into one pass over key / value tiles
// (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao 2023), forward and backward, with no
// [B, H, Tq, Tk] tensor in memory. The differentiable op is autograd/flash_attention.h; the unfused
// op it equals (to float tolerance, dropout mask included) is kernels/attention.h.
//
// Forward, for q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv]:
//   S = scale * q k^T, masked as kernels/attention.h masks it (AttentionMasking)
//   P = softmax of each row of S over its valid keys;  D = dropout(P);  out = D v
//   lse = the log-sum-exp of each row of S over its valid keys, [B, H, Tq]
// out and lse are all the backward pass needs besides q, k and v: it recomputes P = exp(S - lse)
// tile by tile.
// Backward, for dO = dL/d out:
//   delta_i = rowsum(dO_i * out_i)
//   dD = dO v^T;  dP = dD * keep / (1 - p);  dS = P * (dP - delta)
//   dv = D^T dO,  dq = scale * dS k,  dk = scale * dS^T q
// delta_i equals rowsum(P_i * dP_i), the term of the softmax backward, because out already holds the
// dropout: sum_j P_ij dP_ij = sum_j P_ij z_ij (dO_i . v_j) = dO_i . (sum_j D_ij v_j) = dO_i . out_i,
// with z_ij = keep_ij / (1 - p) and D_ij = P_ij z_ij. So the backward never needs a row of P whole.
//
// Masks and dropout: exactly the contract of kernels/attention.h. Key j of row (b, h, i) is valid
// unless key_padding_mask[b, j] is nonzero, or causal and j > i + (Tk - Tq). A row without a valid
// key (or whose valid scores are all -inf) gives zeros in out, lse = -inf (the log-sum-exp of
// nothing), and no gradient. Element e (row-major) of the logical [B, H, Tq, Tk] probability tensor
// is kept iff philox::u32_to_unit_float(random_u32(seed, offset, e)) >= p, and a kept element is
// scaled by 1 / (1 - p): the same mask as the unfused path draws for the same seed and offset.
//
// dtypes: float32 and float64 (lse in the same dtype). 16-bit q, k, v: out in their dtype, lse float32;
// the GPUs run forward and backward on tensor cores where the device has the instruction (P, D and
// dS rounded to 16 bits before they multiply), every other case widens them (exactly) and rounds out
// and the gradients once.
//
// Backends: kernels/ref/flash_attention.cpp (the oracle: the definition in double, row by row),
// kernels/cpu/flash_attention.cpp (the CPU's unfused attention plus a log-sum-exp pass: the CPU
// keeps its own attention), kernels/cuda/flash_attention.cu (the fused tiled kernels: float32, head dims
// d, dv <= kFlashAttentionMaxHeadDim; the FFMA path that runs on every GPU from sm_61) with
// kernels/cuda/flash_attention_mma.cu (the tensor-core kernels for 16-bit inputs, sm_75 / sm_80 up).
// Tests: tests/ops/flash_attention_test.cpp, tests/cuda/flash_attention_kernels_test.cpp.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/attention.h"

namespace define::kernels {

// The largest head dim (d and dv) the CUDA kernels take.
constexpr std::int64_t kFlashAttentionMaxHeadDim = 128;  // internal linkage: no symbol shared by the nvcc and emulator builds

struct FlashAttentionOutput {
  Tensor out;  // [B, H, Tq, dv] contiguous
  Tensor lse;  // [B, H, Tq] contiguous: float32 (float64 for float64 inputs); -inf for a row without a valid key
};

// q, k, v: one float dtype and device, any strides (shapes as above; the entry point checks them and
// throws naming the operands). scale must be finite. masking as for attention_forward.
FlashAttentionOutput flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionMasking& masking, double scale);

// Gradients for upstream grad_out [B, H, Tq, dv], from the forward's out and lse and the same
// masking (padding mask included: the backward recomputes P and must mask it again) and scale.
// Only the gradients asked for are defined.
AttentionGrads flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& out, const Tensor& lse, const AttentionMasking& masking,
                                        double scale, bool need_q, bool need_k, bool need_v);

}  // namespace define::kernels
