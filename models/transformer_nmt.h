// The Transformer encoder-decoder for translation (Vaswani et al. 2017, laid out as fairseq's
// `transformer` with share_all_embeddings), with any of the token representations of
// models/token_representation.h in front of it: the standard embedding (the paper's baseline) or
// the DeFINE unit (DeFINE Table 3: n = 128, k = 1024, m = 512, N = 3).
//
//   embed            ONE TokenInput over the joint source-target vocabulary, read by the encoder
//                    and the decoder (tokens -> [.., d_model])
//   + sinusoidal positions (nn::sinusoidal_positions, position t for the t-th token) -> dropout
//   encoder.layers.* nn::TransformerEncoderLayer x enc_layers (self-attention over the non-padding
//                    source positions)
//   decoder.layers.* nn::TransformerDecoderLayer x dec_layers (causal self-attention, attention
//                    over the encoder output)
//   encoder.layer_norm / decoder.layer_norm   after the last layer, with pre-norm layers only
//   output           the classifier tied to `embed` (TiedOutput): a bias-free Linear d_model -> n
//                    when they differ, then logits = x E^T (+ b) with the n-wide table E. For
//                    DeFINE this is the paper's Figure 1 (the unit maps the table to the model,
//                    the classifier works in the table's space); the paper does not say how its
//                    OpenNMT model tied its output, so this follows the released code's choice.
//
// Parameter parts: embed's unit is `DeFINE`, its table and `output.*` are input-output, the
// layers (and final norms) are the context model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.h"
#include "models/token_representation.h"
#include "models/translation_model.h"
#include "nn/layer_norm.h"
#include "nn/transformer.h"

namespace define::models {

struct TransformerNmtConfig {
  TokenInputConfig input;                // out_dim must equal layer.d_model
  nn::TransformerLayerConfig layer;      // d_model, heads, ffn_dim, dropouts, pre-/post-norm, activation
  std::int64_t enc_layers = 6, dec_layers = 6;
  std::int64_t padding_idx = 0;          // define's subword models put <pad> at 0
  double embed_dropout = 0.1;            // after embedding + positions (fairseq: = dropout)
  bool output_bias = false;              // a bias on the tied logits (fairseq: none)
  bool recompute = false;                // layers keep only their inputs in training (autograd/recompute.h)
};

// Reads the `model` section: input (as read_token_input_config; what it hands the layers, dim for a
// plain embedding, out_dim for a unit, must equal d_model),
// d_model [512], heads [8], ffn_dim [2048], encoder_layers [6], decoder_layers [6], pre_norm
// [false], activation [relu], padding_idx [0], output_bias [false], recompute [false], and the dropout section:
// residual [0.1], attention [0], activation [0], embedding [= residual].
TransformerNmtConfig read_transformer_nmt_config(const Config& model, std::int64_t vocab);

class TransformerNmt : public TranslationModel {
 public:
  explicit TransformerNmt(const TransformerNmtConfig& cfg, Generator& gen = default_generator());

  std::int64_t vocab() const override { return cfg_.input.vocab; }
  std::int64_t padding_idx() const override { return cfg_.padding_idx; }
  Tensor logits(const Tensor& src, const Tensor& tgt_in) const override;
  Tensor loss_sum(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
                  Tensor* nll_sum = nullptr) const override;
  std::unique_ptr<DecodingState> begin_decoding(const Tensor& src) const override;
  Tensor decode_step(DecodingState& state, const Tensor& prev) const override;
  void select_rows(DecodingState& state, const Tensor& rows) const override;
  PartRules part_rules() const override;

  // src [S, B] -> the encoder output [B, S, d_model] and its padding mask [B, S] (nonzero = pad).
  std::pair<Tensor, Tensor> encode(const Tensor& src) const;

  const TransformerNmtConfig& config() const { return cfg_; }
  const TokenInput& token_input() const { return *embed_; }

 private:
  // The teacher-forced decoder's output before the classifier: [T, B, d_model].
  Tensor decoder_states(const Tensor& src, const Tensor& tgt_in) const;
  // tokens [B, T] -> embedded, positions offset, offset + 1, .. added, dropout: [B, T, d_model].
  Tensor embed(const Tensor& tokens, std::int64_t offset) const;

  TransformerNmtConfig cfg_;
  std::shared_ptr<TokenInput> embed_;
  std::vector<std::shared_ptr<nn::TransformerEncoderLayer>> encoder_layers_;
  std::vector<std::shared_ptr<nn::TransformerDecoderLayer>> decoder_layers_;
  std::shared_ptr<nn::LayerNorm> encoder_norm_, decoder_norm_;
  std::shared_ptr<TiedOutput> output_;
};

}  // namespace define::models
