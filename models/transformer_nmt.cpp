#include "models/transformer_nmt.h"

#include <string>
#include <utility>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/recompute.h"
#include "autograd/views.h"
#include "core/error.h"
#include "nn/attention.h"
#include "nn/container.h"

namespace define::models {
namespace {

constexpr const char* kModel = "TransformerNmt";

struct TransformerDecoding : TranslationModel::DecodingState {
  std::vector<nn::DecoderLayerCache> layers;
};

TransformerDecoding& as_transformer(TranslationModel::DecodingState& state) {
  auto* s = dynamic_cast<TransformerDecoding*>(&state);
  if (!s) fail(kModel, "the decoding state was not made by this model's begin_decoding");
  return *s;
}

}  // namespace

void check_token_batch(const char* who, const char* what, const Tensor& tokens) {
  if (!tokens.defined() || tokens.dim() != 2)
    fail(who, "expected {} tokens [T, B], got {}", what, tokens.defined() ? shape_str(tokens.shape()) : "undefined");
  if (tokens.dtype() != DType::Int64 && tokens.dtype() != DType::Int32)
    fail(who, "{} tokens must be int64 or int32, got {}", what, dtype_name(tokens.dtype()));
}

TransformerNmtConfig read_transformer_nmt_config(const Config& c, std::int64_t vocab) {
  TransformerNmtConfig cfg;
  cfg.input = read_token_input_config(c.section("input"), vocab, /*embedding_scaled=*/true);
  nn::TransformerLayerConfig& l = cfg.layer;
  l.d_model = c.get_int("d_model", 512);
  l.heads = c.get_int("heads", 8);
  l.ffn_dim = c.get_int("ffn_dim", 2048);
  l.normalize_before = c.get_bool("pre_norm", false);
  l.activation = nn::parse_activation(c.get_string("activation", "relu"));
  cfg.enc_layers = c.get_int("encoder_layers", 6);
  cfg.dec_layers = c.get_int("decoder_layers", 6);
  cfg.padding_idx = c.get_int("padding_idx", 0);
  cfg.output_bias = c.get_bool("output_bias", false);
  cfg.recompute = c.get_bool("recompute", false);
  const Config d = c.section("dropout");
  l.dropout = d.get_double("residual", 0.1);
  l.attention_dropout = d.get_double("attention", 0.0);
  l.activation_dropout = d.get_double("activation", 0.0);
  cfg.embed_dropout = d.get_double("embedding", l.dropout);
  if (cfg.input.out_dim != l.d_model)
    fail(kModel, "{} gives the layers {}-wide vectors but {} = {} (set the input's {} to d_model)",
         c.path("input"), cfg.input.out_dim, c.path("d_model"), l.d_model,
         cfg.input.kind == TokenInputKind::Embedding ? "dim" : "out_dim");
  return cfg;
}

TransformerNmt::TransformerNmt(const TransformerNmtConfig& cfg, Generator& gen) : TranslationModel(kModel), cfg_(cfg) {
  nn::check_transformer_config(kModel, cfg_.layer);
  if (cfg_.input.vocab <= 0) fail(kModel, "vocab = {} must be positive", cfg_.input.vocab);
  if (cfg_.input.out_dim != cfg_.layer.d_model)
    fail(kModel, "the token input's width {} differs from d_model {}", cfg_.input.out_dim, cfg_.layer.d_model);
  if (cfg_.padding_idx < 0 || cfg_.padding_idx >= cfg_.input.vocab)
    fail(kModel, "padding_idx = {} is outside the vocabulary [0, {})", cfg_.padding_idx, cfg_.input.vocab);
  if (cfg_.enc_layers < 1 || cfg_.dec_layers < 1)
    fail(kModel, "encoder_layers and decoder_layers must be >= 1, got {} and {}", cfg_.enc_layers, cfg_.dec_layers);
  if (!(cfg_.embed_dropout >= 0.0 && cfg_.embed_dropout < 1.0))
    fail(kModel, "embedding dropout {} must be in [0, 1)", cfg_.embed_dropout);
  if (cfg_.input.adaptive_map || cfg_.input.kind == TokenInputKind::Adaptive || cfg_.input.kind == TokenInputKind::Projected)
    fail(kModel, "input type '{}' has no single table for the tied classifier; use embedding, projective, define, "
         "define-iclr or dextra", to_string(cfg_.input.kind));
  embed_ = register_module("embed", std::make_shared<TokenInput>(cfg_.input, gen));
  auto encoder = register_module("encoder", std::make_shared<nn::Module>("TransformerEncoder"));
  auto enc_list = encoder->register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t i = 0; i < cfg_.enc_layers; ++i)
    encoder_layers_.push_back(enc_list->push_back(std::make_shared<nn::TransformerEncoderLayer>(cfg_.layer, gen)));
  if (cfg_.layer.normalize_before)
    encoder_norm_ = encoder->register_module("layer_norm", std::make_shared<nn::LayerNorm>(cfg_.layer.d_model));
  auto decoder = register_module("decoder", std::make_shared<nn::Module>("TransformerDecoder"));
  auto dec_list = decoder->register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t i = 0; i < cfg_.dec_layers; ++i)
    decoder_layers_.push_back(dec_list->push_back(std::make_shared<nn::TransformerDecoderLayer>(cfg_.layer, gen)));
  if (cfg_.layer.normalize_before)
    decoder_norm_ = decoder->register_module("layer_norm", std::make_shared<nn::LayerNorm>(cfg_.layer.d_model));
  output_ = register_module(
      "output", std::make_shared<TiedOutput>(*embed_, TiedOutputConfig{.hidden_dim = cfg_.layer.d_model, .bias = cfg_.output_bias}, gen));
}

Tensor TransformerNmt::embed(const Tensor& tokens, std::int64_t offset) const {
  const Tensor x = embed_->forward(tokens);
  const Tensor pos = nn::sinusoidal_positions(tokens.size(1), cfg_.layer.d_model, offset, {x.dtype(), x.device()});
  return dropout(add(x, pos), cfg_.embed_dropout, is_training(), generator());
}

std::pair<Tensor, Tensor> TransformerNmt::encode(const Tensor& src) const {
  check_token_batch(kModel, "source", src);
  const Tensor tokens = contiguous(transpose(src, 0, 1));  // [B, S]
  const Tensor padding = eq(tokens, static_cast<double>(cfg_.padding_idx));
  Tensor x = embed(tokens, 0);
  for (const auto& layer : encoder_layers_) {
    if (cfg_.recompute && is_training()) {  // only the layer's input is kept (autograd/recompute.h)
      nn::TransformerEncoderLayer& l = *layer;
      x = recompute([&l](const std::vector<Tensor>& in) { return l.forward(in[0], in[1]); }, {x, padding},
                    l.parameters(), generator());
    } else {
      x = layer->forward(x, padding);
    }
  }
  return {encoder_norm_ ? encoder_norm_->forward(x) : x, padding};
}

Tensor TransformerNmt::logits(const Tensor& src, const Tensor& tgt_in) const {
  return output_->logits(decoder_states(src, tgt_in));
}

Tensor TransformerNmt::loss_sum(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out,
                                double label_smoothing, Tensor* nll_sum) const {
  check_token_batch(kModel, "target output", tgt_out);
  if (tgt_out.shape() != tgt_in.shape())
    fail(kModel, "target output {} does not match target input {}", shape_str(tgt_out.shape()),
         shape_str(tgt_in.shape()));
  return output_->smoothed_loss(decoder_states(src, tgt_in), tgt_out, cfg_.padding_idx, label_smoothing,
                                Reduction::Sum, nll_sum);
}

Tensor TransformerNmt::decoder_states(const Tensor& src, const Tensor& tgt_in) const {
  check_token_batch(kModel, "target", tgt_in);
  if (src.defined() && src.dim() == 2 && src.size(1) != tgt_in.size(1))
    fail(kModel, "source {} and target {} batch sizes differ", shape_str(src.shape()), shape_str(tgt_in.shape()));
  const auto [enc, enc_padding] = encode(src);
  Tensor x = embed(contiguous(transpose(tgt_in, 0, 1)), 0);  // [B, T, d]
  for (const auto& layer : decoder_layers_) {
    if (cfg_.recompute && is_training()) {
      nn::TransformerDecoderLayer& l = *layer;
      x = recompute([&l](const std::vector<Tensor>& in) { return l.forward(in[0], in[1], in[2]); },
                    {x, enc, enc_padding}, l.parameters(), generator());
    } else {
      x = layer->forward(x, enc, enc_padding);
    }
  }
  if (decoder_norm_) x = decoder_norm_->forward(x);
  // Time-first before the classifier: [T, B, d] is d_model wide, the logits V wide.
  return contiguous(transpose(x, 0, 1));
}

std::unique_ptr<TranslationModel::DecodingState> TransformerNmt::begin_decoding(const Tensor& src) const {
  if (is_training()) fail(kModel, "decoding needs eval mode (call eval() first)");
  const auto [enc, enc_padding] = encode(src);
  auto state = std::make_unique<TransformerDecoding>();
  state->rows = src.size(1);
  for (const auto& layer : decoder_layers_) state->layers.push_back(layer->start_cache(enc, enc_padding));
  return state;
}

Tensor TransformerNmt::decode_step(DecodingState& state, const Tensor& prev) const {
  TransformerDecoding& s = as_transformer(state);
  if (!prev.defined() || prev.dim() != 1 || prev.size(0) != s.rows)
    fail(kModel, "decode_step expects the previous tokens [{}], got {}", s.rows,
         prev.defined() ? shape_str(prev.shape()) : "undefined");
  Tensor x = embed(reshape(prev, {s.rows, 1}), s.steps);  // [N, 1, d]
  for (std::size_t i = 0; i < decoder_layers_.size(); ++i) x = decoder_layers_[i]->forward_step(x, s.layers[i]);
  if (decoder_norm_) x = decoder_norm_->forward(x);
  ++s.steps;
  return reshape(output_->logits(x), {s.rows, vocab()});
}

void TransformerNmt::select_rows(DecodingState& state, const Tensor& rows) const {
  TransformerDecoding& s = as_transformer(state);
  if (!rows.defined() || rows.dim() != 1) fail(kModel, "select_rows expects row indices [N']");
  for (auto& layer : s.layers) layer.select_rows(rows);
  s.rows = rows.size(0);
}

PartRules TransformerNmt::part_rules() const {
  PartRules rules = embed_->part_rules("embed.");
  rules.emplace_back("", kPartContext);
  rules.emplace_back("output.", kPartInputOutput);
  return rules;
}

}  // namespace define::models
