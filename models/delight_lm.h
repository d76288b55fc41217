// DeLighT language model, as released for WikiText-103 (spec §5.2, §4.2, §6):
//
//   embed          DExTraEmb: map -> locked dropout -> DExTra n -> d_m (depth emb_depth, width
//                  emb_width_mult, p = d_m / 2). The map is an AdaptiveInput (cutoffs, factor;
//                  each band scaled by sqrt(dim_i) and projected to n) when `adaptive`, else a
//                  plain V x n table times sqrt(n).
//   + sinusoidal positions (fairseq's, padding-aware) -> dropout (pe_dropout; one mask per
//                  sequence and channel unless pe_dropout_locked is off)
//   layers.0..B-1  DeLighT decoder blocks without cross-attention, PRE-norm (the LM arch forces
//                  it: "training is not stable without this"), depth / width by block-wise
//                  scaling (§4.3)
//   layer_norm     only with final_norm (WT-103 sets no_decoder_final_norm: off by default)
//   project_out    Linear d_m -> n without bias (absent when d_m == n)
//   adaptive_softmax  tied to the adaptive input (word tables and tail projections): its own
//                  parameters are the cluster logits n x #tails; or, without `adaptive`, logits
//                  h E^T with the map table E.
// One G (§4.1) sizes the embedding unit and every block. Tokens are time-first [T, B].
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/language_model.h"
#include "nn/adaptive.h"
#include "nn/delight_block.h"
#include "nn/dextra_embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::models {

struct DelightLmConfig {
  std::int64_t vocab = 0;          // V (WT-103: 267,744)
  std::int64_t padding_idx = -1;   // none: word corpora reserve no pad id (fairseq's dictionary puts <pad> at 1)
  std::int64_t map_dim = 128;      // n
  std::int64_t d_m = 1024;
  std::int64_t max_groups = 0;     // G; 0: nn::dextra_max_groups(d_m, group_rule)
  nn::DExTraGroupRule group_rule = nn::DExTraGroupRule::Released;  // DExTra groups (nn/dextra.h)
  std::int64_t emb_depth = 4;      // N_min
  double emb_width_mult = 2.0;     // w_m
  std::int64_t min_depth = 4, max_depth = 12, layers = 12;
  double width_mult = 2.0;
  std::int64_t ffn_reduction = 4;
  bool final_norm = false;
  bool adaptive = true;                                // adaptive input + tied adaptive softmax
  std::vector<std::int64_t> cutoffs{20000, 60000};
  double adaptive_factor = 2.0;                        // input and softmax (tying needs them equal)
  nn::GroupedLinearNorm dextra_norm = nn::GroupedLinearNorm::Chunk;
  nn::Activation activation = nn::Activation::Swish;
  bool shuffle = true;
  // Dropouts (spec §4.5: WT-103 uses 0.1 * d_m / 1024 style values; all 0 here by default).
  double dropout = 0.0, attention_dropout = 0.0, activation_dropout = 0.0, ffn_dropout = 0.0;
  double dextra_dropout = 0.0, emb_dropout = 0.0, pe_dropout = 0.0;
  bool pe_dropout_locked = true;  // one position-dropout mask per (sequence, channel), as released
  double adaptive_softmax_dropout = 0.0;
};

// The block config of block b under cfg's scaling (pre-norm, no cross-attention).
nn::DelightBlockConfig delight_lm_block_config(const DelightLmConfig& cfg, std::int64_t b);

// As a LanguageModel it sees one window at a time (fairseq's LM task: no state carried; the
// state it returns is empty).
class DelightLm : public LanguageModel {
 public:
  explicit DelightLm(const DelightLmConfig& cfg, Generator& gen = default_generator());

  Output forward(const Tensor& tokens, const Tensor& targets, const LmState& state = {}) override;
  std::pair<Tensor, LmState> log_prob(const Tensor& tokens, const LmState& state = {}) override;
  // The DExTra embedding is the DeFINE part; its map (table or adaptive bands) input-output.
  PartRules part_rules() const override;

  // tokens [T, B] -> the features the output layer reads, [T, B, n].
  Tensor features(const Tensor& tokens) const;
  // Mean negative log-likelihood of target [T, B] given tokens [T, B] (targets equal to
  // padding_idx are ignored).
  Tensor loss(const Tensor& tokens, const Tensor& target) const;
  // tokens [T, B] -> log-probabilities [T, B, V].
  Tensor log_probs(const Tensor& tokens) const;

  const DelightLmConfig& config() const { return cfg_; }
  const nn::DExTraEmb& embed() const { return *embed_; }
  const std::shared_ptr<nn::AdaptiveSoftmax>& adaptive_softmax() const { return softmax_; }  // null unless adaptive

 private:
  DelightLmConfig cfg_;
  std::shared_ptr<nn::DExTraEmb> embed_;
  std::vector<std::shared_ptr<nn::DelightDecoderBlock>> layers_;
  std::shared_ptr<nn::LayerNorm> layer_norm_;
  std::shared_ptr<nn::Linear> project_out_;
  std::shared_ptr<nn::AdaptiveSoftmax> softmax_;
};

}  // namespace define::models
