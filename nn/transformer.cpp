#include "nn/transformer.h"

#include <functional>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/index.h"
#include "autograd/views.h"

namespace define::nn {

namespace {

// One residual sublayer: x + Dropout(f(x')) with x' = LN(x) pre-norm, or LN(x + Dropout(f(x)))
// post-norm.
Tensor residual(const Module& layer, const Tensor& x, const LayerNorm& norm, const TransformerLayerConfig& cfg,
                const std::function<Tensor(const Tensor&)>& f) {
  const Tensor in = cfg.normalize_before ? norm.forward(x) : x;
  const Tensor y = add(x, dropout(f(in), cfg.dropout, layer.is_training(), layer.generator()));
  return cfg.normalize_before ? y : norm.forward(y);
}

Tensor feed_forward(const Module& layer, const Tensor& x, const Linear& fc1, const Linear& fc2,
                    const TransformerLayerConfig& cfg) {
  const Tensor h = apply_activation(fc1.forward(x), cfg.activation);
  return fc2.forward(dropout(h, cfg.activation_dropout, layer.is_training(), layer.generator()));
}

MultiheadAttentionOptions attention_options(const TransformerLayerConfig& cfg, std::int64_t kv_dim = 0) {
  return {.dropout = cfg.attention_dropout, .kdim = kv_dim, .vdim = kv_dim};
}

void check_sequence(const char* layer, const char* which, const Tensor& x, std::int64_t width) {
  if (!x.defined() || x.dim() != 3 || x.size(2) != width)
    fail(layer, "{} must be [B, T, {}], got {}", which, width, x.defined() ? shape_str(x.shape()) : "undefined");
}

}  // namespace

void check_transformer_config(const char* layer, const TransformerLayerConfig& c) {
  if (c.d_model <= 0 || c.heads <= 0 || c.ffn_dim <= 0 || c.encoder_dim < 0)
    fail(layer, "d_model, heads and ffn_dim must be positive (encoder_dim >= 0), got {}, {}, {} ({})", c.d_model,
         c.heads, c.ffn_dim, c.encoder_dim);
  if (c.d_model % c.heads != 0) fail(layer, "d_model {} is not divisible by heads {}", c.d_model, c.heads);
  for (const auto& [name, p] : {std::pair{"dropout", c.dropout}, std::pair{"attention_dropout", c.attention_dropout},
                                std::pair{"activation_dropout", c.activation_dropout}})
    if (!(p >= 0.0 && p <= 1.0)) fail(layer, "{} {} is outside [0, 1]", name, p);
  if (c.activation == Activation::None) fail(layer, "the FFN needs an activation (relu, gelu or swish), got none");
}

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerConfig& cfg, Generator& gen)
    : Module("TransformerEncoderLayer"), cfg_(cfg) {
  check_transformer_config("TransformerEncoderLayer", cfg);
  self_attn_ = register_module("self_attn",
                               std::make_shared<MultiheadAttention>(cfg.d_model, cfg.heads, attention_options(cfg), gen));
  self_attn_layer_norm_ = register_module("self_attn_layer_norm", std::make_shared<LayerNorm>(cfg.d_model));
  fc1_ = register_module("fc1", std::make_shared<Linear>(cfg.d_model, cfg.ffn_dim, LinearOptions{}, gen));
  fc2_ = register_module("fc2", std::make_shared<Linear>(cfg.ffn_dim, cfg.d_model, LinearOptions{}, gen));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& padding_mask) const {
  check_sequence("TransformerEncoderLayer", "x", x, cfg_.d_model);
  Tensor h = residual(*this, x, *self_attn_layer_norm_, cfg_,
                      [&](const Tensor& in) { return self_attn_->forward(in, in, in, padding_mask); });
  return residual(*this, h, *final_layer_norm_, cfg_,
                  [&](const Tensor& in) { return feed_forward(*this, in, *fc1_, *fc2_, cfg_); });
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerConfig& cfg, Generator& gen)
    : Module("TransformerDecoderLayer"), cfg_(cfg) {
  check_transformer_config("TransformerDecoderLayer", cfg);
  const std::int64_t enc = cfg.encoder_dim > 0 ? cfg.encoder_dim : cfg.d_model;
  self_attn_ = register_module("self_attn",
                               std::make_shared<MultiheadAttention>(cfg.d_model, cfg.heads, attention_options(cfg), gen));
  self_attn_layer_norm_ = register_module("self_attn_layer_norm", std::make_shared<LayerNorm>(cfg.d_model));
  encoder_attn_ = register_module(
      "encoder_attn", std::make_shared<MultiheadAttention>(cfg.d_model, cfg.heads, attention_options(cfg, enc), gen));
  encoder_attn_layer_norm_ = register_module("encoder_attn_layer_norm", std::make_shared<LayerNorm>(cfg.d_model));
  fc1_ = register_module("fc1", std::make_shared<Linear>(cfg.d_model, cfg.ffn_dim, LinearOptions{}, gen));
  fc2_ = register_module("fc2", std::make_shared<Linear>(cfg.ffn_dim, cfg.d_model, LinearOptions{}, gen));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& encoder_out,
                                        const Tensor& encoder_padding_mask, const Tensor& self_padding_mask) const {
  check_sequence("TransformerDecoderLayer", "x", x, cfg_.d_model);
  Tensor h = residual(*this, x, *self_attn_layer_norm_, cfg_, [&](const Tensor& in) {
    return self_attn_->forward(in, in, in, self_padding_mask, /*causal=*/true);
  });
  if (encoder_out.defined()) {
    h = residual(*this, h, *encoder_attn_layer_norm_, cfg_, [&](const Tensor& in) {
      return encoder_attn_->forward(in, encoder_out, encoder_out, encoder_padding_mask);
    });
  }
  return residual(*this, h, *final_layer_norm_, cfg_,
                  [&](const Tensor& in) { return feed_forward(*this, in, *fc1_, *fc2_, cfg_); });
}

void DecoderLayerCache::select_rows(const Tensor& rows) {
  for (Tensor* t : {&self_k, &self_v, &encoder_k, &encoder_v, &encoder_padding_mask})
    if (t->defined()) *t = index_select(*t, 0, rows);
}

DecoderLayerCache TransformerDecoderLayer::start_cache(const Tensor& encoder_out,
                                                       const Tensor& encoder_padding_mask) const {
  DecoderLayerCache cache;
  if (encoder_out.defined()) {
    cache.encoder_k = contiguous(encoder_attn_->project_keys(encoder_out));
    cache.encoder_v = contiguous(encoder_attn_->project_values(encoder_out));
    cache.encoder_padding_mask = encoder_padding_mask;
  }
  return cache;
}

Tensor TransformerDecoderLayer::forward_step(const Tensor& x, DecoderLayerCache& cache) const {
  check_sequence("TransformerDecoderLayer", "x", x, cfg_.d_model);
  if (x.size(1) != 1) fail("TransformerDecoderLayer", "forward_step takes one position [N, 1, {}], got {}", cfg_.d_model, shape_str(x.shape()));
  if (is_training()) fail("TransformerDecoderLayer", "forward_step is for decoding: call eval() first (dropout would differ from forward())");
  Tensor h = residual(*this, x, *self_attn_layer_norm_, cfg_, [&](const Tensor& in) {
    const Tensor k = self_attn_->project_keys(in), v = self_attn_->project_values(in);  // [N, H, 1, d]
    cache.self_k = cache.self_k.defined() ? concat({cache.self_k, k}, 2) : contiguous(k);
    cache.self_v = cache.self_v.defined() ? concat({cache.self_v, v}, 2) : contiguous(v);
    // The newest position attends to every cached one: no mask needed.
    return self_attn_->attend(in, cache.self_k, cache.self_v);
  });
  if (cache.encoder_k.defined()) {
    h = residual(*this, h, *encoder_attn_layer_norm_, cfg_, [&](const Tensor& in) {
      return encoder_attn_->attend(in, cache.encoder_k, cache.encoder_v, cache.encoder_padding_mask);
    });
  }
  return residual(*this, h, *final_layer_norm_, cfg_,
                  [&](const Tensor& in) { return feed_forward(*this, in, *fc1_, *fc2_, cfg_); });
}

}  // namespace define::nn
