// DExTraEmb: the embedding wrapper of the released code (spec §2.6), used by DeLighT and by the
// released DeFINE mode.
//
//   e   = map(tokens)                 Embedding(V, n), N(0, n^-0.5) init, padding row zeroed,
//                                     or an AdaptiveInput (nn/adaptive.h) with output width n
//   e   = e * sqrt(n)                 plain table only, unless scale_embedding is off (an adaptive
//                                     input scales each band by sqrt(dim_i) itself: s = 1)
//   e   = LockedDropout(e)            one mask per (sequence, channel), shared over time
//   out = DExTraUnit(d_in = n, p = d_out / 2, d_out, w, N, G)(e)
//
// Note d_max = n * w is relative to the map width n, so with n = 128, w = 2 the unit's peak is
// 256 whatever d_out is (spec §2.6 [FLAG], what produced the reported models).
//
// The map layer may be shared (a DeLighT NMT model shares one V x n table between the encoder's
// and the decoder's embedding units and the output layer; the LM ties its adaptive input to the
// adaptive softmax): pass it to the constructor.
// Submodules: map (the table or adaptive input), map_dropout, dextra (the unit). Tokens are
// time-first [T, B].
#pragma once

#include <cstdint>
#include <memory>

#include "nn/adaptive.h"
#include "nn/dextra.h"
#include "nn/embedding.h"
#include "nn/locked_dropout.h"
#include "nn/module.h"

namespace define::nn {

struct DExTraEmbConfig {
  std::int64_t vocab = 0;          // V
  std::int64_t map_dim = 128;      // n
  std::int64_t padding_idx = -1;   // row zeroed at init and never updated; -1: none
  bool scale_embedding = true;     // multiply the map output by sqrt(n)
  double map_dropout = 0.0;        // locked dropout after the map layer (delight_emb_dropout)
  // The unit: d_in = n, p = out_dim / 2.
  std::int64_t out_dim = 0;        // d_m
  double width_mult = 2.0;         // w (relative to n)
  std::int64_t depth = 4;          // N
  std::int64_t max_groups = 1;     // G
  DExTraMode mode = DExTraMode::DExTra;
  DExTraGroupRule group_rule = DExTraGroupRule::Released;
  GroupedLinearNorm norm = GroupedLinearNorm::Chunk;
  Activation activation = Activation::Swish;
  double dropout = 0.0;            // inside the unit
  bool shuffle = true;
};

// The unit config DExTraEmb builds: d_in = n, p = out_dim / 2, d_out = out_dim.
DExTraConfig dextra_emb_unit_config(const DExTraEmbConfig& cfg);

class DExTraEmb : public Module {
 public:
  // With its own map table.
  explicit DExTraEmb(const DExTraEmbConfig& cfg, Generator& gen = default_generator());
  // With a shared map table (cfg.vocab and cfg.map_dim must match it; its padding row is used).
  DExTraEmb(const DExTraEmbConfig& cfg, std::shared_ptr<Embedding> shared_map, Generator& gen = default_generator());
  // With an adaptive input as the map layer (cfg.vocab and cfg.map_dim must match its vocab and
  // dim; cfg.scale_embedding and cfg.padding_idx are not used: the adaptive input has its own).
  DExTraEmb(const DExTraEmbConfig& cfg, std::shared_ptr<AdaptiveInput> adaptive_map,
            Generator& gen = default_generator());

  // tokens [T, B] (int32/int64) -> [T, B, out_dim].
  Tensor forward(const Tensor& tokens) const;

  const DExTraEmbConfig& config() const { return cfg_; }
  // The map layer: exactly one of the two is set.
  const std::shared_ptr<Embedding>& map() const { return map_; }
  const std::shared_ptr<AdaptiveInput>& adaptive_map() const { return adaptive_; }
  const DExTraUnit& unit() const { return *unit_; }

 private:
  void build(Generator& gen);
  DExTraEmbConfig cfg_;
  std::shared_ptr<Embedding> map_;
  std::shared_ptr<AdaptiveInput> adaptive_;
  std::shared_ptr<LockedDropout> map_dropout_;
  std::shared_ptr<DExTraUnit> unit_;
};

}  // namespace define::nn
