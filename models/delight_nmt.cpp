#include "models/delight_nmt.h"

#include <algorithm>
#include <string>
#include <utility>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/index.h"
#include "autograd/linear_cross_entropy.h"
#include "autograd/matmul.h"
#include "autograd/softmax.h"
#include "autograd/views.h"
#include "models/delight_common.h"
#include "core/factory.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/dropout.h"

namespace define::models {

Tensor delight_positions(const Tensor& padding, std::int64_t dim, std::int64_t padding_idx, DType dtype, Device device) {
  if (padding.dim() != 2) fail("delight_positions", "expected a padding mask [T, B], got {}", shape_str(padding.shape()));
  if (padding_idx < -1) fail("delight_positions", "padding_idx = {} must be >= -1", padding_idx);
  const std::int64_t T = padding.size(0), B = padding.size(1);
  std::vector<bool> pad(static_cast<std::size_t>(T * B));
  const Tensor host = copy_to_device(padding, Device::cpu());
  DEFINE_DISPATCH_ALL(host.dtype(), "delight_positions", [&] {
    const std::vector<scalar_t> v = host.to_vector<scalar_t>();
    for (std::size_t i = 0; i < v.size(); ++i) pad[i] = v[i] != scalar_t(0);
  });
  // Row of the position table for each token: padding_idx + (non-padding tokens so far), counted
  // per sequence; padding tokens read an extra zero row after the last position.
  std::vector<std::int64_t> row(pad.size());
  std::int64_t last = padding_idx;
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t p = padding_idx;
    for (std::int64_t t = 0; t < T; ++t)
      if (!pad[t * B + b]) row[t * B + b] = ++p;
    last = std::max(last, p);
  }
  for (std::size_t i = 0; i < row.size(); ++i)
    if (pad[i]) row[i] = last + 1;
  const Tensor table = concat({nn::sinusoidal_positions(last + 1, dim, 0, {dtype, device}), zeros({1, dim}, {dtype, device})}, 0);
  return reshape(index_select(table, 0, from_vector(row, {T * B}, device)), {T, B, dim});
}

nn::DelightBlockConfig delight_nmt_block_config(const DelightNmtConfig& c, bool decoder, std::int64_t b) {
  const nn::BlockScaling s = decoder ? nn::block_wise_scaling(c.dec_min_depth, c.dec_max_depth, c.dec_width_mult, c.dec_layers)
                                     : nn::block_wise_scaling(c.enc_min_depth, c.enc_max_depth, c.enc_width_mult, c.enc_layers);
  return delight_block_config(c, s, b, c.pre_norm, /*cross_attention=*/decoder);
}

nn::DExTraEmbConfig delight_nmt_embedding_config(const DelightNmtConfig& c) { return delight_embedding_config(c); }

namespace {

// DExTra embedding + positions + positional dropout: the input of the block stack.
Tensor embed_with_positions(const nn::Module& owner, const nn::DExTraEmb& embed, const Tensor& tokens,
                            const Tensor& padding, const DelightNmtConfig& c) {
  const Tensor x = embed.forward(tokens);
  const Tensor pos = delight_positions(padding, c.d_m, c.padding_idx, x.dtype(), x.device());
  return delight_position_dropout(c, add(x, pos), owner.is_training(), owner.generator());
}

// [T, B] -> [B, T], contiguous: the key padding mask layout of the attention.
Tensor batch_first(const Tensor& padding) { return contiguous(transpose(padding, 0, 1)); }

void check_tokens(const char* who, const char* what, const Tensor& t) {
  if (t.dim() != 2) fail(who, "expected {} tokens [T, B], got {}", what, shape_str(t.shape()));
}

}  // namespace

// ---- encoder

DelightEncoder::DelightEncoder(const DelightNmtConfig& cfg, std::shared_ptr<nn::Embedding> table, Generator& gen)
    : Module("DelightEncoder"), cfg_(cfg) {
  embed_ = register_module("embed", std::make_shared<nn::DExTraEmb>(delight_nmt_embedding_config(cfg_), std::move(table), gen));
  auto list = register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t b = 0; b < cfg_.enc_layers; ++b)
    layers_.push_back(list->push_back(std::make_shared<nn::DelightEncoderBlock>(delight_nmt_block_config(cfg_, false, b), gen)));
  if (cfg_.pre_norm && cfg_.final_norm) layer_norm_ = register_module("layer_norm", std::make_shared<nn::LayerNorm>(cfg_.d_m));
}

Tensor DelightEncoder::forward(const Tensor& src, const Tensor& src_padding) const {
  check_tokens("DelightEncoder", "source", src);
  const Tensor pad = src_padding.defined() ? src_padding : eq(src, double(cfg_.padding_idx));
  if (pad.shape() != src.shape())
    fail("DelightEncoder", "source padding {} does not match the tokens {}", shape_str(pad.shape()), shape_str(src.shape()));
  Tensor x = embed_with_positions(*this, *embed_, src, pad, cfg_);
  const Tensor key_pad = batch_first(pad);
  for (const auto& layer : layers_) x = layer->forward(x, key_pad);
  return layer_norm_ ? layer_norm_->forward(x) : x;
}

// ---- decoder

DelightDecoder::DelightDecoder(const DelightNmtConfig& cfg, std::shared_ptr<nn::Embedding> table, Generator& gen)
    : Module("DelightDecoder"), cfg_(cfg) {
  embed_ = register_module("embed", std::make_shared<nn::DExTraEmb>(delight_nmt_embedding_config(cfg_), std::move(table), gen));
  auto list = register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t b = 0; b < cfg_.dec_layers; ++b)
    layers_.push_back(list->push_back(std::make_shared<nn::DelightDecoderBlock>(delight_nmt_block_config(cfg_, true, b), gen)));
  if (cfg_.pre_norm && cfg_.final_norm) layer_norm_ = register_module("layer_norm", std::make_shared<nn::LayerNorm>(cfg_.d_m));
  if (cfg_.d_m != cfg_.map_dim)
    project_out_ = register_module("project_out", std::make_shared<nn::Linear>(cfg_.d_m, cfg_.map_dim, nn::LinearOptions{.bias = false}, gen));
}

Tensor DelightDecoder::forward(const Tensor& tgt, const Tensor& encoder_out, const Tensor& encoder_padding) const {
  check_tokens("DelightDecoder", "target", tgt);
  Tensor x = embed_with_positions(*this, *embed_, tgt, eq(tgt, double(cfg_.padding_idx)), cfg_);
  for (const auto& layer : layers_) x = layer->forward(x, encoder_out, encoder_padding);
  return finish(x);
}

Tensor DelightDecoder::finish(const Tensor& x) const {
  const Tensor y = layer_norm_ ? layer_norm_->forward(x) : x;
  return project_out_ ? project_out_->forward(y) : y;
}

std::vector<nn::DelightDecoderCache> DelightDecoder::start_caches(const Tensor& encoder_out,
                                                                 const Tensor& encoder_padding) const {
  std::vector<nn::DelightDecoderCache> caches;
  for (const auto& layer : layers_) caches.push_back(layer->start_cache(encoder_out, encoder_padding));
  return caches;
}

Tensor DelightDecoder::forward_step(const Tensor& tokens, std::int64_t step,
                                    std::vector<nn::DelightDecoderCache>& caches) const {
  check_tokens("DelightDecoder", "target", tokens);
  if (tokens.size(0) != 1) fail("DelightDecoder", "forward_step takes one position [1, N], got {}", shape_str(tokens.shape()));
  if (step < 0) fail("DelightDecoder", "step must be >= 0, got {}", step);
  if (caches.size() != layers_.size())
    fail("DelightDecoder", "{} caches for {} blocks: make them with start_caches", caches.size(), layers_.size());
  const Tensor e = embed_->forward(tokens);  // [1, N, d_m]
  // delight_positions numbers a prefix without padding padding_idx + 1, padding_idx + 2, ...
  const Tensor pos = nn::sinusoidal_positions(1, cfg_.d_m, cfg_.padding_idx + 1 + step, {e.dtype(), e.device()});
  Tensor x = delight_position_dropout(cfg_, add(e, reshape(pos, {1, 1, cfg_.d_m})), is_training(), generator());
  for (std::size_t i = 0; i < layers_.size(); ++i) x = layers_[i]->forward_step(x, caches[i]);
  return finish(x);
}

// ---- model

DelightNmt::DelightNmt(const DelightNmtConfig& cfg, Generator& gen) : TranslationModel("DelightNmt"), cfg_(cfg) {
  if (cfg_.vocab <= 0) fail("DelightNmt", "vocab = {} must be positive", cfg_.vocab);
  // The shared table first, so its parameter reads `embed_tokens.weight` (the encoder's and the
  // decoder's `embed.map` are the same module and are not listed again).
  table_ = register_module("embed_tokens", std::make_shared<nn::Embedding>(cfg_.vocab, cfg_.map_dim,
                                                                           nn::EmbeddingOptions{.padding_idx = cfg_.padding_idx}, gen));
  encoder_ = register_module("encoder", std::make_shared<DelightEncoder>(cfg_, table_, gen));
  decoder_ = register_module("decoder", std::make_shared<DelightDecoder>(cfg_, table_, gen));
}

Tensor DelightNmt::forward(const Tensor& src, const Tensor& src_padding, const Tensor& tgt) const {
  return linear(decoder_states(src, src_padding, tgt), table_->weight());  // h E^T: the output layer is the shared table
}

Tensor DelightNmt::loss_sum(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
                            Tensor* nll_sum) const {
  check_tokens("DelightNmt", "target output", tgt_out);
  if (tgt_out.shape() != tgt_in.shape())
    fail("DelightNmt", "target output {} does not match target input {}", shape_str(tgt_out.shape()),
         shape_str(tgt_in.shape()));
  return linear_cross_entropy(decoder_states(src, Tensor(), tgt_in), table_->weight(), Tensor(), tgt_out,
                              cfg_.padding_idx, label_smoothing, Reduction::Sum, nll_sum);
}

Tensor DelightNmt::decoder_states(const Tensor& src, const Tensor& src_padding, const Tensor& tgt) const {
  check_tokens("DelightNmt", "source", src);
  check_tokens("DelightNmt", "target", tgt);
  if (src.size(1) != tgt.size(1))
    fail("DelightNmt", "source {} and target {} batch sizes differ", shape_str(src.shape()), shape_str(tgt.shape()));
  const Tensor pad = src_padding.defined() ? src_padding : eq(src, double(cfg_.padding_idx));
  const Tensor enc = encoder_->forward(src, pad);
  return decoder_->forward(tgt, enc, batch_first(pad));
}

Tensor DelightNmt::loss(const Tensor& logits, const Tensor& target, double label_smoothing) const {
  if (logits.dim() != 3 || target.dim() != 2 || logits.size(0) != target.size(0) || logits.size(1) != target.size(1))
    fail("DelightNmt", "loss expects logits [T, B, V] and target [T, B], got {} and {}", shape_str(logits.shape()),
         shape_str(target.shape()));
  const std::int64_t rows = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {rows, logits.size(2)}), reshape(target, {rows}), cfg_.padding_idx,
                       label_smoothing, Reduction::Mean);
}

namespace {

struct DelightDecoding : TranslationModel::DecodingState {
  std::vector<nn::DelightDecoderCache> caches;  // one per decoder block
};

DelightDecoding& as_delight(TranslationModel::DecodingState& state) {
  auto* s = dynamic_cast<DelightDecoding*>(&state);
  if (!s) fail("DelightNmt", "the decoding state was not made by this model's begin_decoding");
  return *s;
}

}  // namespace

std::unique_ptr<TranslationModel::DecodingState> DelightNmt::begin_decoding(const Tensor& src) const {
  if (is_training()) fail("DelightNmt", "decoding needs eval mode (call eval() first)");
  check_tokens("DelightNmt", "source", src);
  auto state = std::make_unique<DelightDecoding>();
  const Tensor pad = eq(src, double(cfg_.padding_idx));
  state->caches = decoder_->start_caches(encoder_->forward(src, pad), batch_first(pad));
  state->rows = src.size(1);
  return state;
}

Tensor DelightNmt::decode_step(DecodingState& state, const Tensor& prev) const {
  DelightDecoding& s = as_delight(state);
  if (!prev.defined() || prev.dim() != 1 || prev.size(0) != s.rows)
    fail("DelightNmt", "decode_step expects the previous tokens [{}], got {}", s.rows,
         prev.defined() ? shape_str(prev.shape()) : "undefined");
  const Tensor h = decoder_->forward_step(reshape(to_dtype(prev, DType::Int64), {1, s.rows}), s.steps, s.caches);
  ++s.steps;
  return linear(reshape(h, {s.rows, h.size(2)}), table_->weight());
}

void DelightNmt::select_rows(DecodingState& state, const Tensor& rows) const {
  DelightDecoding& s = as_delight(state);
  if (!rows.defined() || rows.dim() != 1) fail("DelightNmt", "select_rows expects row indices [N']");
  for (auto& cache : s.caches) cache.select_rows(rows);
  s.rows = rows.size(0);
}

PartRules DelightNmt::part_rules() const {
  return {{"", kPartInputOutput},          {"encoder.layers.", kPartContext},
          {"decoder.layers.", kPartContext}, {"encoder.layer_norm.", kPartContext},
          {"decoder.layer_norm.", kPartContext}, {"encoder.embed.", kPartDefine},
          {"decoder.embed.", kPartDefine},   {"encoder.embed.map.", kPartInputOutput},
          {"decoder.embed.map.", kPartInputOutput}};
}

}  // namespace define::models
