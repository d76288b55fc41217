// The standard Transformer encoder and decoder layers (Vaswani et al. 2017), laid out as
// fairseq's TransformerEncoderLayer / TransformerDecoderLayer, batch-first ([B, T, d_model]).
//
// Encoder layer, post-norm (normalize_before = false; the paper's form):
//   x = LN(x + Dropout(SelfAttn(x, x, x, padding)))
//   x = LN(x + Dropout(fc2(Dropout_act(act(fc1(x))))))
// pre-norm (normalize_before = true) normalises each sublayer's input instead and leaves the sum
// unnormalised: x = x + Dropout(SelfAttn(LN(x), ...)), and likewise for the FFN.
// Decoder layer: causal self-attention, then attention over the encoder output (with its padding
// mask), then the FFN; each sublayer with its own residual, dropout and LayerNorm as above.
//
// Parameter names (fairseq's): self_attn.{q,k,v,out}_proj.*, self_attn_layer_norm.*, [decoder:
// encoder_attn.*, encoder_attn_layer_norm.*], fc1.*, fc2.*, final_layer_norm.*.
// Counts (E = d_model, F = ffn_dim, biases on): encoder 4(E^2 + E) + 2E + (EF + F) + (FE + E) + 2E;
// decoder adds 4(E^2 + E) + 2E (with encoder_dim = E). E = 512, F = 2048: 3,152,384 and 4,204,032.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/attention.h"
#include "nn/grouped_linear.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::nn {

struct TransformerLayerConfig {
  std::int64_t d_model = 512;
  std::int64_t heads = 8;
  std::int64_t ffn_dim = 2048;
  double dropout = 0.1;             // on each sublayer's output, before the residual add
  double attention_dropout = 0.0;   // on the attention probabilities
  double activation_dropout = 0.0;  // after the FFN activation
  bool normalize_before = false;    // pre-norm; false is the paper's post-norm
  Activation activation = Activation::Relu;
  std::int64_t encoder_dim = 0;     // decoder only: width of the encoder output (0: d_model)
};

// Throws "<layer>: ..." naming the bad value (sizes, divisibility, probabilities).
void check_transformer_config(const char* layer, const TransformerLayerConfig& cfg);

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerConfig& cfg, Generator& gen = default_generator());

  // x [B, T, d_model], padding_mask undefined or [B, T] (nonzero = padded) -> [B, T, d_model].
  Tensor forward(const Tensor& x, const Tensor& padding_mask = Tensor()) const;

  const TransformerLayerConfig& config() const { return cfg_; }
  const std::shared_ptr<MultiheadAttention>& self_attn() const { return self_attn_; }

 private:
  TransformerLayerConfig cfg_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<LayerNorm> self_attn_layer_norm_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<LayerNorm> final_layer_norm_;
};

// What one decoder layer keeps between steps of incremental decoding: the projected keys and
// values of every earlier target position (self-attention, [N, H, t, E / H], growing by one
// position a step) and of the encoder output (computed once), and the encoder's padding mask.
struct DecoderLayerCache {
  Tensor self_k, self_v;
  Tensor encoder_k, encoder_v;
  Tensor encoder_padding_mask;  // undefined or [N, S]
  // Keeps rows `rows` ([N'] int64, on the cache's device) of every tensor, in that order: beam
  // search's reordering after each step.
  void select_rows(const Tensor& rows);
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerConfig& cfg, Generator& gen = default_generator());

  // x [B, T, d_model] (target so far), encoder_out [B, S, encoder_dim] or undefined (a decoder
  // without an encoder: no cross-attention), encoder_padding_mask undefined or [B, S],
  // self_padding_mask undefined or [B, T] -> [B, T, d_model]. Self-attention is causal.
  Tensor forward(const Tensor& x, const Tensor& encoder_out, const Tensor& encoder_padding_mask = Tensor(),
                 const Tensor& self_padding_mask = Tensor()) const;

  // Incremental decoding. start_cache projects the encoder output [N, S, encoder_dim] (undefined:
  // no cross-attention) once; forward_step then takes the next position's input x [N, 1, d_model],
  // appends its keys and values to the cache and returns that position's output, which equals the
  // last row of forward() over the whole prefix (tests/models/translation_model_test.cpp, through the
  // models' incremental decoding). Eval mode only: dropout would make the two differ.
  DecoderLayerCache start_cache(const Tensor& encoder_out, const Tensor& encoder_padding_mask = Tensor()) const;
  Tensor forward_step(const Tensor& x, DecoderLayerCache& cache) const;

  const TransformerLayerConfig& config() const { return cfg_; }
  const std::shared_ptr<MultiheadAttention>& self_attn() const { return self_attn_; }
  const std::shared_ptr<MultiheadAttention>& encoder_attn() const { return encoder_attn_; }

 private:
  TransformerLayerConfig cfg_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<LayerNorm> self_attn_layer_norm_;
  std::shared_ptr<MultiheadAttention> encoder_attn_;
  std::shared_ptr<LayerNorm> encoder_attn_layer_norm_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<LayerNorm> final_layer_norm_;
};

}  // namespace define::nn
