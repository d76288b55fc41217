#include "models/delight_lm.h"

#include <utility>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/linear_cross_entropy.h"
#include "autograd/matmul.h"
#include "autograd/softmax.h"
#include "autograd/views.h"
#include "models/delight_common.h"
#include "models/delight_nmt.h"
#include "nn/container.h"

namespace define::models {

nn::DelightBlockConfig delight_lm_block_config(const DelightLmConfig& c, std::int64_t b) {
  const nn::BlockScaling s = nn::block_wise_scaling(c.min_depth, c.max_depth, c.width_mult, c.layers);
  return delight_block_config(c, s, b, /*pre_norm=*/true, /*cross_attention=*/false);
}

DelightLm::DelightLm(const DelightLmConfig& cfg, Generator& gen) : LanguageModel("DelightLm"), cfg_(cfg) {
  if (cfg_.vocab <= 0) fail("DelightLm", "vocab = {} must be positive", cfg_.vocab);
  const nn::DExTraEmbConfig emb = delight_embedding_config(cfg_);
  std::shared_ptr<nn::AdaptiveInput> adaptive_input;
  if (cfg_.adaptive) {
    adaptive_input = std::make_shared<nn::AdaptiveInput>(
        nn::AdaptiveInputConfig{.vocab = cfg_.vocab,
                                .dim = cfg_.map_dim,
                                .cutoffs = cfg_.cutoffs,
                                .factor = cfg_.adaptive_factor,
                                .project_band0 = true,
                                .scale = true,
                                .padding_idx = cfg_.padding_idx},
        gen);
    embed_ = register_module("embed", std::make_shared<nn::DExTraEmb>(emb, adaptive_input, gen));
  } else {
    embed_ = register_module("embed", std::make_shared<nn::DExTraEmb>(emb, gen));
  }
  auto list = register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t b = 0; b < cfg_.layers; ++b)
    layers_.push_back(list->push_back(std::make_shared<nn::DelightDecoderBlock>(delight_lm_block_config(cfg_, b), gen)));
  if (cfg_.final_norm) layer_norm_ = register_module("layer_norm", std::make_shared<nn::LayerNorm>(cfg_.d_m));
  if (cfg_.d_m != cfg_.map_dim)
    project_out_ = register_module("project_out", std::make_shared<nn::Linear>(cfg_.d_m, cfg_.map_dim, nn::LinearOptions{.bias = false}, gen));
  if (adaptive_input) {
    // Tied word tables and tail projections: what remains is the cluster logits (spec §5.2).
    softmax_ = register_module("adaptive_softmax",
                               std::make_shared<nn::AdaptiveSoftmax>(
                                   nn::AdaptiveSoftmaxConfig{.vocab = cfg_.vocab,
                                                             .dim = cfg_.map_dim,
                                                             .cutoffs = cfg_.cutoffs,
                                                             .factor = cfg_.adaptive_factor,
                                                             .dropout = cfg_.adaptive_softmax_dropout,
                                                             .tie_weights = true,
                                                             .tie_projections = true},
                                   adaptive_input.get(), gen));
  }
}

Tensor DelightLm::features(const Tensor& tokens) const {
  if (tokens.dim() != 2) fail("DelightLm", "expected tokens [T, B], got {}", shape_str(tokens.shape()));
  Tensor x = embed_->forward(tokens);
  const Tensor pos = delight_positions(eq(tokens, double(cfg_.padding_idx)), cfg_.d_m, cfg_.padding_idx, x.dtype(), x.device());
  x = delight_position_dropout(cfg_, add(x, pos), is_training(), generator());
  for (const auto& layer : layers_) x = layer->forward(x);
  if (layer_norm_) x = layer_norm_->forward(x);
  return project_out_ ? project_out_->forward(x) : x;
}

Tensor DelightLm::loss(const Tensor& tokens, const Tensor& target) const {
  if (target.shape() != tokens.shape())
    fail("DelightLm", "target {} does not match tokens {}", shape_str(target.shape()), shape_str(tokens.shape()));
  const Tensor h = features(tokens);
  const std::int64_t rows = h.size(0) * h.size(1);
  const Tensor flat_h = reshape(h, {rows, cfg_.map_dim}), flat_t = reshape(target, {rows});
  if (softmax_) return softmax_->loss(flat_h, flat_t, Reduction::Mean, cfg_.padding_idx);
  return linear_cross_entropy(flat_h, embed_->map()->weight(), Tensor(), flat_t, cfg_.padding_idx);
}

Tensor DelightLm::log_probs(const Tensor& tokens) const {
  const Tensor h = features(tokens);
  if (softmax_) return softmax_->log_prob(h);
  return log_softmax(linear(h, embed_->map()->weight()), -1);
}

LanguageModel::Output DelightLm::forward(const Tensor& tokens, const Tensor& targets, const LmState& /*state*/) {
  Output out;
  out.loss = loss(tokens, targets);
  out.objective = out.loss;
  return out;
}

std::pair<Tensor, LmState> DelightLm::log_prob(const Tensor& tokens, const LmState& /*state*/) {
  return {log_probs(tokens), {}};
}

PartRules DelightLm::part_rules() const {
  return {{"", kPartInputOutput},
          {"layers.", kPartContext},
          {"layer_norm.", kPartContext},
          {"embed.", kPartDefine},
          {"embed.map.", kPartInputOutput}};
}

}  // namespace define::models
