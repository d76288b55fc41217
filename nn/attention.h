// Multi-head attention and sinusoidal positions, batch-first ([B, T, E]) throughout.
//
// MultiheadAttention (Vaswani et al. 2017, as fairseq's MultiheadAttention):
//   q = q_proj(query), k = k_proj(key), v = v_proj(value), each split into H heads of E / H,
//   per head softmax(q k^T / sqrt(E / H) + masks) v (scaled_dot_product_attention, with dropout on
//   the probabilities), heads concatenated, out_proj.
// Parameters: q_proj.{weight,bias} [E, E] / [E], k_proj [E, kdim], v_proj [E, vdim], out_proj
// [E, E]: E * (E + kdim + vdim + E) + 4 E with bias (4 * (E^2 + E) when kdim = vdim = E).
// Initialisation as fairseq: Xavier-uniform weights, zero biases; when kdim = vdim = E the q, k,
// v weights use gain 1/sqrt(2), which gives each the bound fairseq's single fused [3E, E]
// in-projection had (sqrt(6 / (E + 3E)) = sqrt(6 / 2E) / sqrt(2)).
#pragma once

#include <cstdint>
#include <memory>

#include "core/factory.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::nn {

struct MultiheadAttentionOptions {
  bool bias = true;       // biases on all four projections
  double dropout = 0.0;   // on the attention probabilities, while training
  std::int64_t kdim = 0;  // width of `key` inputs (0: embed_dim)
  std::int64_t vdim = 0;  // width of `value` inputs (0: embed_dim)
};

class MultiheadAttention : public Module {
 public:
  // Throws "MultiheadAttention: embed_dim 10 is not divisible by num_heads 4" and the like.
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions opt = {},
                     Generator& gen = default_generator());

  // query [B, Tq, E], key [B, Tk, kdim], value [B, Tk, vdim] -> [B, Tq, E].
  // key_padding_mask: undefined or [B, Tk], nonzero = a padded key no query attends to.
  // causal: query i attends keys j <= i + (Tk - Tq) (the future is masked).
  // A query with no key left to attend gets out_proj's bias (its attention output is zero).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& key_padding_mask = Tensor(), bool causal = false) const;

  // The same attention in two halves, for incremental decoding (a decoder caches the projected
  // keys and values of earlier steps and of the encoder output instead of recomputing them):
  // key [B, Tk, kdim] -> k_proj's output split into heads [B, H, Tk, E / H] (likewise values),
  // and attend() over such projected k, v. forward(q, k, v, m, c) is exactly
  // attend(q, project_keys(k), project_values(v), m, c).
  Tensor project_keys(const Tensor& key) const;
  Tensor project_values(const Tensor& value) const;
  // query [B, Tq, E], k [B, H, Tk, E / H], v [B, H, Tk, E / H] -> [B, Tq, E].
  Tensor attend(const Tensor& query, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask = Tensor(),
                bool causal = false) const;

  std::int64_t embed_dim() const { return embed_dim_; }
  std::int64_t num_heads() const { return num_heads_; }
  std::int64_t head_dim() const { return embed_dim_ / num_heads_; }
  double dropout() const { return dropout_; }
  const std::shared_ptr<Linear>& q_proj() const { return q_proj_; }
  const std::shared_ptr<Linear>& k_proj() const { return k_proj_; }
  const std::shared_ptr<Linear>& v_proj() const { return v_proj_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }

 private:
  // x [B, T, E] -> [B, H, T, E / H] (a view: heads are slices of the feature dim).
  Tensor split_heads(const Tensor& x) const;

  std::int64_t embed_dim_, num_heads_;
  double dropout_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, out_proj_;
};

// Sinusoidal position encodings [length, dim] for positions offset, offset + 1, ...
// The fairseq / tensor2tensor layout (what DeLighT uses, spec §4.4), not the interleaved one of
// the Transformer paper: with half = dim / 2 and frequencies w_i = 10000^(-i / (half - 1)),
// i = 0 .. half - 1 (so w_0 = 1 and w_{half-1} = 1/10000),
//   row p = [sin(p w_0) .. sin(p w_{half-1}), cos(p w_0) .. cos(p w_{half-1})],
// plus one zero column when dim is odd. half = 1 uses w_0 = 1. Computed in double, then cast.
// dim >= 2 and length >= 0, else it throws naming the value.
Tensor sinusoidal_positions(std::int64_t length, std::int64_t dim, std::int64_t offset = 0,
                            TensorOptions opt = {});

// Adds sinusoidal positions to a sequence: x [B, T, dim] (or [T, dim]) + positions offset ..
// offset + T - 1, in x's dtype and on x's device. No parameters; positions are computed on the
// host per call (T * dim values).
class SinusoidalPositions : public Module {
 public:
  explicit SinusoidalPositions(std::int64_t dim);
  Tensor forward(const Tensor& x, std::int64_t offset = 0) const;
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
};

}  // namespace define::nn
