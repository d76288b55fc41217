// Scaled dot-product attention, differentiable. The building block of every attention layer of
// define (nn/attention.h: multi-head, and DeLighT's single-head attention).
//
//   out = dropout(softmax(scale * q k^T + mask)) v
//
// Forward, backward, reference, CPU and CUDA kernels: kernels/attention.h and its backends;
// gradient formulas: autograd/attention.cpp.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace define {

// Which kernels compute attention. Auto (the default): the fused kernels of autograd/flash_attention.h
// (no [B, H, Tq, Tk] tensor in memory) on cuda and emu devices for float32 and 16-bit inputs with head
// dims up to 128, the unfused GEMM + row-kernel path otherwise (the CPU keeps its own). Fused or
// Unfused force one (Fused where the fused kernels cannot run is an error naming why).
enum class AttentionKernel { Auto, Fused, Unfused };

// The process-wide choice for AttentionKernel::Auto; starts as $DEFINE_ATTENTION (auto, fused or
// unfused; anything else is an error on first use), else Auto. For comparing whole models both ways.
void set_default_attention_kernel(AttentionKernel kernel);
AttentionKernel default_attention_kernel();

struct AttentionOptions {
  // Undefined, or [B, Tk] of any dtype: nonzero marks a padded key that no query attends to.
  Tensor key_padding_mask{};
  // Query i (0-based) attends keys j <= i + (Tk - Tq): the usual causal mask when Tq == Tk, and
  // the right one when the queries are the last Tq positions of Tk (incremental decoding).
  bool causal = false;
  double scale = 0.0;      // 0: 1 / sqrt(d)
  double dropout = 0.0;    // on the attention probabilities (inverted dropout)
  bool training = true;    // dropout only while training
  Generator* generator = nullptr;  // nullptr: default_generator()
  AttentionKernel kernel = AttentionKernel::Auto;
};

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] (one dtype, float32 or float64, one device,
// any strides) -> [B, H, Tq, dv] contiguous. A query whose keys are all masked gets zeros (no
// NaN), and passes no gradient. Shape mismatches throw naming the operands and their shapes.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace define
