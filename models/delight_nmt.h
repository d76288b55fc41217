// DeLighT encoder-decoder for translation, as released (spec §4, §5.1):
//
//   embed_tokens          ONE V x n table (n = 128), shared by the source embedding, the target
//                         embedding and the output layer (joined dictionary), counted once
//   encoder.embed         DExTraEmb: map (the shared table) * sqrt(n) -> locked dropout ->
//                         DExTra n -> d_m (depth emb_depth, width emb_width_mult, p = d_m / 2)
//   + sinusoidal positions (fairseq's, padding-aware) -> dropout (pe_dropout; one mask per
//                  sequence and channel unless pe_dropout_locked is off)
//   encoder.layers.0..B-1 DeLighT encoder blocks, depth / width by block-wise scaling (§4.3)
//   decoder.embed         its own DExTraEmb over the same shared table
//   + positions -> dropout
//   decoder.layers.0..B-1 DeLighT decoder blocks (causal self-attention, cross-attention)
//   decoder.project_out   Linear d_m -> n without bias (absent when d_m == n)
//   logits                h E^T with the shared table E (no bias)
// With pre_norm and final_norm, encoder.layer_norm / decoder.layer_norm follow the last block.
// One G (§4.1) sizes the embedding units and every block. Parameter names read hierarchically,
// e.g. `encoder.layers.3.dextra.glts.2.weight`.
//
// Layout: tokens are time-first [T, B]; padding masks [T, B] too (nonzero = padding). Without a
// source mask, padding is where src == padding_idx (fairseq); the target's always is.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/delight_block.h"
#include "nn/dextra_embedding.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "models/translation_model.h"

namespace define::models {

// fairseq's sinusoidal positions for a batch with padding mask [T, B] (nonzero = padding): token
// t of sequence b gets position padding_idx + (its index among the sequence's non-padding
// tokens, from 1), so left- and right-padded batches read the same; padding gets zeros. Row p is
// [sin(p w_0) .. sin(p w_{h-1}), cos(p w_0) .. cos(p w_{h-1})] with h = dim / 2 and
// w_i = exp(-i ln(10000) / (h - 1)), rows of nn::sinusoidal_positions. -> [T, B, dim] of `dtype`
// on `device`, no gradient. (Per-token positions are why this is not a plain [T, dim] table.)
Tensor delight_positions(const Tensor& padding, std::int64_t dim, std::int64_t padding_idx, DType dtype, Device device);

struct DelightNmtConfig {
  std::int64_t vocab = 0;          // joined dictionary size V
  std::int64_t padding_idx = 1;    // fairseq's <pad>
  std::int64_t map_dim = 128;      // n
  std::int64_t d_m = 512;          // model width
  std::int64_t max_groups = 0;     // G; 0: nn::dextra_max_groups(d_m, group_rule)
  nn::DExTraGroupRule group_rule = nn::DExTraGroupRule::Released;  // DExTra groups (nn/dextra.h)
  std::int64_t emb_depth = 4;      // embedding DExTra: the released archs use N_min and w_m
  double emb_width_mult = 2.0;
  std::int64_t enc_min_depth = 4, enc_max_depth = 8, enc_layers = 8;
  double enc_width_mult = 2.0;
  std::int64_t dec_min_depth = 4, dec_max_depth = 8, dec_layers = 8;
  double dec_width_mult = 2.0;
  std::int64_t ffn_reduction = 4;
  bool pre_norm = false;           // NMT archs: post-norm
  bool final_norm = true;          // with pre_norm: a LayerNorm after the last block
  nn::GroupedLinearNorm dextra_norm = nn::GroupedLinearNorm::Chunk;
  nn::Activation activation = nn::Activation::Swish;
  bool shuffle = true;
  // Dropouts (spec §4.5 gives the released values per task and d_m).
  double dropout = 0.0;             // residual dropout after each attention
  double attention_dropout = 0.0;   // on the attention probabilities
  double activation_dropout = 0.0;  // inside the FFN
  double ffn_dropout = 0.0;         // after the FFN
  double dextra_dropout = 0.0;      // inside every DExTra (embedding units and blocks)
  double emb_dropout = 0.0;         // locked dropout on the map output
  double pe_dropout = 0.0;          // after adding positions
  bool pe_dropout_locked = true;    // one mask per (sequence, channel), as released; else per element
};

// The block config of encoder (decoder = false) or decoder block b under cfg's scaling.
nn::DelightBlockConfig delight_nmt_block_config(const DelightNmtConfig& cfg, bool decoder, std::int64_t b);
// The embedding unit config (shared table dims; the unit d_m wide).
nn::DExTraEmbConfig delight_nmt_embedding_config(const DelightNmtConfig& cfg);

class DelightEncoder : public nn::Module {
 public:
  DelightEncoder(const DelightNmtConfig& cfg, std::shared_ptr<nn::Embedding> table, Generator& gen);
  // src [S, B], src_padding [S, B] (undefined: src == padding_idx) -> [S, B, d_m].
  Tensor forward(const Tensor& src, const Tensor& src_padding) const;
  std::size_t num_layers() const { return layers_.size(); }

 private:
  DelightNmtConfig cfg_;
  std::shared_ptr<nn::DExTraEmb> embed_;
  std::vector<std::shared_ptr<nn::DelightEncoderBlock>> layers_;
  std::shared_ptr<nn::LayerNorm> layer_norm_;
};

class DelightDecoder : public nn::Module {
 public:
  DelightDecoder(const DelightNmtConfig& cfg, std::shared_ptr<nn::Embedding> table, Generator& gen);
  // tgt [T, B], encoder_out [S, B, d_m], encoder_padding [B, S] or undefined -> features
  // [T, B, n] (after project_out), ready for the tied output layer.
  Tensor forward(const Tensor& tgt, const Tensor& encoder_out, const Tensor& encoder_padding) const;
  std::size_t num_layers() const { return layers_.size(); }

  // Incremental decoding: each block's cache over encoder_out [S, N, d_m] (padding [N, S] or
  // undefined), then one position at a time: tokens [1, N] at target position `step` (0 for the
  // first, bos) -> features [1, N, n], equal to forward()'s row `step` over the same prefix
  // (a prefix without padding, as decoding feeds). Eval mode only.
  std::vector<nn::DelightDecoderCache> start_caches(const Tensor& encoder_out, const Tensor& encoder_padding) const;
  Tensor forward_step(const Tensor& tokens, std::int64_t step, std::vector<nn::DelightDecoderCache>& caches) const;

 private:
  // The stack after the blocks: final LayerNorm (pre-norm) and the projection to the table width.
  Tensor finish(const Tensor& x) const;

  DelightNmtConfig cfg_;
  std::shared_ptr<nn::DExTraEmb> embed_;
  std::vector<std::shared_ptr<nn::DelightDecoderBlock>> layers_;
  std::shared_ptr<nn::LayerNorm> layer_norm_;
  std::shared_ptr<nn::Linear> project_out_;
};

// Incremental decoding (translation_model.h) caches each decoder block's keys and values of the
// earlier target positions and of the encoder output, as the Transformer does: a step runs the
// decoder on one position (tested equal to logits()).
class DelightNmt : public TranslationModel {
 public:
  explicit DelightNmt(const DelightNmtConfig& cfg, Generator& gen = default_generator());

  std::int64_t vocab() const override { return cfg_.vocab; }
  std::int64_t padding_idx() const override { return cfg_.padding_idx; }
  Tensor logits(const Tensor& src, const Tensor& tgt_in) const override { return forward(src, Tensor(), tgt_in); }
  Tensor loss_sum(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
                  Tensor* nll_sum = nullptr) const override;
  std::unique_ptr<DecodingState> begin_decoding(const Tensor& src) const override;
  Tensor decode_step(DecodingState& state, const Tensor& prev) const override;
  void select_rows(DecodingState& state, const Tensor& rows) const override;
  // The shared table and the output projection are input-output, the two DExTra embedding units
  // the token-representation part, the blocks the context model.
  PartRules part_rules() const override;

  // src [S, B], src_padding [S, B] (nonzero = padding; undefined: src == padding_idx), tgt
  // [T, B] (the decoder input, i.e. the target shifted right) -> logits [T, B, V].
  Tensor forward(const Tensor& src, const Tensor& src_padding, const Tensor& tgt) const;
  // Label-smoothed cross entropy of logits [T, B, V] against target [T, B], averaged over the
  // non-padding target tokens: (1 - eps) nll + eps mean_c(-log p_c) per token (fairseq's
  // label_smoothed_cross_entropy, eps = label_smoothing).
  Tensor loss(const Tensor& logits, const Tensor& target, double label_smoothing = 0.0) const;

  const DelightNmtConfig& config() const { return cfg_; }
  const nn::Embedding& embed_tokens() const { return *table_; }
  const DelightEncoder& encoder() const { return *encoder_; }
  const DelightDecoder& decoder() const { return *decoder_; }

 private:
  // forward() before the classifier: the decoder's features [T, B, n].
  Tensor decoder_states(const Tensor& src, const Tensor& src_padding, const Tensor& tgt) const;

  DelightNmtConfig cfg_;
  std::shared_ptr<nn::Embedding> table_;
  std::shared_ptr<DelightEncoder> encoder_;
  std::shared_ptr<DelightDecoder> decoder_;
};

}  // namespace define::models
