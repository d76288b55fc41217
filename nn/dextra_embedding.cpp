#include "nn/dextra_embedding.h"

#include <cmath>
#include <utility>

#include "autograd/elementwise.h"

namespace define::nn {

DExTraConfig dextra_emb_unit_config(const DExTraEmbConfig& c) {
  if (c.out_dim <= 0 || c.out_dim % 2 != 0)
    fail("DExTraEmb", "out_dim = {} must be positive and even (the unit projects to p = out_dim / 2)", c.out_dim);
  return {.d_in = c.map_dim,
          .p = c.out_dim / 2,
          .d_out = c.out_dim,
          .width_mult = c.width_mult,
          .depth = c.depth,
          .max_groups = c.max_groups,
          .mode = c.mode,
          .group_rule = c.group_rule,
          .norm = c.norm,
          .activation = c.activation,
          .dropout = c.dropout,
          .shuffle = c.shuffle};
}

DExTraEmb::DExTraEmb(const DExTraEmbConfig& cfg, Generator& gen) : Module("DExTraEmb"), cfg_(cfg) {
  if (cfg_.vocab <= 0 || cfg_.map_dim <= 0)
    fail("DExTraEmb", "vocab and map_dim must be positive, got {} x {}", cfg_.vocab, cfg_.map_dim);
  // Embedding's default init is N(0, n^-0.5), the released map layer's.
  map_ = register_module("map", std::make_shared<Embedding>(cfg_.vocab, cfg_.map_dim,
                                                            EmbeddingOptions{.padding_idx = cfg_.padding_idx}, gen));
  build(gen);
}

DExTraEmb::DExTraEmb(const DExTraEmbConfig& cfg, std::shared_ptr<Embedding> shared_map, Generator& gen)
    : Module("DExTraEmb"), cfg_(cfg) {
  if (!shared_map) fail("DExTraEmb", "the shared map table is null");
  if (shared_map->num_embeddings() != cfg_.vocab || shared_map->dim() != cfg_.map_dim)
    fail("DExTraEmb", "shared map table is {} x {}, config says {} x {}", shared_map->num_embeddings(),
         shared_map->dim(), cfg_.vocab, cfg_.map_dim);
  cfg_.padding_idx = shared_map->padding_idx();
  map_ = register_module("map", std::move(shared_map));
  build(gen);
}

DExTraEmb::DExTraEmb(const DExTraEmbConfig& cfg, std::shared_ptr<AdaptiveInput> adaptive_map, Generator& gen)
    : Module("DExTraEmb"), cfg_(cfg) {
  if (!adaptive_map) fail("DExTraEmb", "the adaptive map layer is null");
  const AdaptiveInputConfig& a = adaptive_map->config();
  if (a.vocab != cfg_.vocab || a.dim != cfg_.map_dim)
    fail("DExTraEmb", "adaptive input is {} words x {}, config says {} x {}", a.vocab, a.dim, cfg_.vocab, cfg_.map_dim);
  cfg_.padding_idx = a.padding_idx;
  cfg_.scale_embedding = false;  // each band is scaled by sqrt(dim_i) inside the adaptive input
  adaptive_ = register_module("map", std::move(adaptive_map));
  build(gen);
}

void DExTraEmb::build(Generator& gen) {
  map_dropout_ = register_module("map_dropout", std::make_shared<LockedDropout>(cfg_.map_dropout));
  unit_ = register_module("dextra", std::make_shared<DExTraUnit>(dextra_emb_unit_config(cfg_), gen));
}

Tensor DExTraEmb::forward(const Tensor& tokens) const {
  if (tokens.dim() != 2) fail("DExTraEmb", "expected tokens [T, B], got {}", shape_str(tokens.shape()));
  Tensor e = map_ ? map_->forward(tokens) : adaptive_->forward(tokens);
  if (cfg_.scale_embedding) e = mul(e, std::sqrt(static_cast<double>(cfg_.map_dim)));
  return unit_->forward(map_dropout_->forward(e));
}

}  // namespace define::nn
