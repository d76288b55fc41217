// What the DeLighT models share: the DExTra embedding's config and one block's config, read from
// a model config. DelightNmtConfig and DelightLmConfig name these fields alike, so one template
// serves both and the two models cannot drift apart in how they build a block or the embedding.
#pragma once

#include <cstdint>

#include "autograd/dropout.h"
#include "core/tensor.h"
#include "nn/delight_block.h"
#include "nn/dextra_embedding.h"
#include "nn/locked_dropout.h"

namespace define::models {

// G when the config leaves max_groups at 0: the group rule's (released: 2^ceil(log2(d_m // 32)),
// paper: ceil(d_m / 32); nn/dextra.h). One G serves the embedding and every block, as released.
template <class ModelConfig>
std::int64_t delight_groups(const ModelConfig& c) {
  return c.max_groups > 0 ? c.max_groups : nn::dextra_max_groups(c.d_m, c.group_rule);
}

// The DExTra embedding of a DeLighT model: scaled map table, unit to d_m (spec §4).
template <class ModelConfig>
nn::DExTraEmbConfig delight_embedding_config(const ModelConfig& c) {
  return {.vocab = c.vocab,
          .map_dim = c.map_dim,
          .padding_idx = c.padding_idx,
          .scale_embedding = true,
          .map_dropout = c.emb_dropout,
          .out_dim = c.d_m,
          .width_mult = c.emb_width_mult,
          .depth = c.emb_depth,
          .max_groups = delight_groups(c),
          .mode = nn::DExTraMode::DExTra,
          .group_rule = c.group_rule,
          .norm = c.dextra_norm,
          .activation = c.activation,
          .dropout = c.dextra_dropout,
          .shuffle = c.shuffle};
}

// Block b of a stack whose block-wise scaling is `s`.
template <class ModelConfig>
nn::DelightBlockConfig delight_block_config(const ModelConfig& c, const nn::BlockScaling& s, std::int64_t b,
                                            bool pre_norm, bool cross_attention) {
  return {.d_m = c.d_m,
          .depth = s.depths.at(static_cast<std::size_t>(b)),
          .width_mult = s.widths.at(static_cast<std::size_t>(b)),
          .max_groups = delight_groups(c),
          .group_rule = c.group_rule,
          .ffn_reduction = c.ffn_reduction,
          .pre_norm = pre_norm,
          .cross_attention = cross_attention,
          .dextra_norm = c.dextra_norm,
          .activation = c.activation,
          .shuffle = c.shuffle,
          .dropout = c.dropout,
          .attention_dropout = c.attention_dropout,
          .activation_dropout = c.activation_dropout,
          .ffn_dropout = c.ffn_dropout,
          .dextra_dropout = c.dextra_dropout};
}

// The dropout after positions are added to the embedding, x [T, B, d_m]: with pe_dropout_locked
// (model.dropout.positions_mask = sequence, the default) one mask per (sequence, channel) shared
// over time, as the reference's RecurrentDropout; else one per element (positions_mask = element).
template <class ModelConfig>
Tensor delight_position_dropout(const ModelConfig& c, const Tensor& x, bool training, Generator& gen) {
  return c.pe_dropout_locked ? nn::locked_dropout(x, c.pe_dropout, training, gen)
                             : dropout(x, c.pe_dropout, training, gen);
}

}  // namespace define::models
