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
};

// q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] (one dtype, float32 or float64, one device,
// any strides) -> [B, H, Tq, dv] contiguous. A query whose keys are all masked gets zeros (no
// NaN), and passes no gradient. Shape mismatches throw naming the operands and their shapes.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace define
