#include "nn/delight_block.h"

#include <cmath>

#include "autograd/attention.h"
#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/index.h"
#include "autograd/views.h"
#include "nn/dropout.h"

namespace define::nn {

BlockScaling block_wise_scaling(std::int64_t min_depth, std::int64_t max_depth, double width_mult, std::int64_t blocks) {
  const char* op = "block_wise_scaling";
  if (min_depth < 1 || max_depth < min_depth)
    fail(op, "depths must satisfy 1 <= N_min <= N_max, got N_min = {}, N_max = {}", min_depth, max_depth);
  if (blocks < 1) fail(op, "the number of blocks B = {} must be at least 1", blocks);
  if (!(width_mult > 0) || !std::isfinite(width_mult)) fail(op, "width_mult w_m = {} must be positive", width_mult);
  BlockScaling s;
  s.depths = linspace_int(double(min_depth), double(max_depth), blocks);
  const double top = width_mult + double(max_depth) / double(min_depth) - 1.0;
  for (double w : linspace(width_mult, top, blocks)) {
    // numpy.round(x, 3): scale, round half to even, scale back.
    volatile double scaled = w * 1000.0;
    s.widths.push_back(std::nearbyint(scaled) / 1000.0);
  }
  return s;
}

DExTraConfig delight_block_dextra_config(const DelightBlockConfig& c) {
  return {.d_in = c.d_m,
          .p = c.d_m / 2,
          .d_out = c.d_m / 2,
          .width_mult = c.width_mult,
          .depth = c.depth,
          .max_groups = c.max_groups > 0 ? c.max_groups : dextra_max_groups(c.d_m, c.group_rule),
          .mode = DExTraMode::DExTra,
          .group_rule = c.group_rule,
          .norm = c.dextra_norm,
          .activation = c.activation,
          .dropout = c.dextra_dropout,
          .shuffle = c.shuffle};
}

// ---- SingleHeadAttention

SingleHeadAttention::SingleHeadAttention(std::int64_t proj_dim, std::int64_t out_dim, Generator& gen)
    : Module("SingleHeadAttention") {
  qkv_proj_ = register_module("qkv_proj", std::make_shared<Linear>(proj_dim, 3 * proj_dim, LinearOptions{}, gen));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(proj_dim, out_dim, LinearOptions{}, gen));
}

SingleHeadAttention::SingleHeadAttention(std::int64_t query_dim, std::int64_t memory_dim, std::int64_t proj_dim,
                                         std::int64_t out_dim, Generator& gen)
    : Module("SingleHeadAttention") {
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(query_dim, proj_dim, LinearOptions{}, gen));
  kv_proj_ = register_module("kv_proj", std::make_shared<Linear>(memory_dim, 2 * proj_dim, LinearOptions{}, gen));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(proj_dim, out_dim, LinearOptions{}, gen));
}

namespace {

// [T, B, d] <-> [B, 1, T, d], the layout scaled_dot_product_attention takes (views, no copies).
Tensor to_heads(const Tensor& t) { return unsqueeze(permute(t, {1, 0, 2}), 1); }
Tensor from_heads(const Tensor& t) { return permute(squeeze(t, 1), {1, 0, 2}); }

void check_time_first(const char* what, const Tensor& t, std::int64_t width) {
  if (t.dim() != 3 || t.size(2) != width)
    fail("SingleHeadAttention", "{} must be [T, B, {}], got {}", what, width, shape_str(t.shape()));
}

}  // namespace

std::vector<Tensor> SingleHeadAttention::project_self(const Tensor& x) const {
  if (!is_self()) fail("SingleHeadAttention", "project_self on a cross-attention");
  check_time_first("the input", x, qkv_proj_->in_features());
  return chunk(qkv_proj_->forward(x), 3, -1);
}

Tensor SingleHeadAttention::project_query(const Tensor& x) const {
  if (is_self()) fail("SingleHeadAttention", "project_query on a self-attention");
  check_time_first("the query input", x, q_proj_->in_features());
  return q_proj_->forward(x);
}

std::vector<Tensor> SingleHeadAttention::project_memory(const Tensor& memory) const {
  if (is_self()) fail("SingleHeadAttention", "project_memory on a self-attention");
  if (!memory.defined()) fail("SingleHeadAttention", "cross-attention needs the encoder output");
  check_time_first("the encoder output", memory, kv_proj_->in_features());
  return chunk(kv_proj_->forward(memory), 2, -1);
}

Tensor SingleHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                                   bool causal, double attention_dropout) const {
  if (k.size(1) != q.size(1))
    fail("SingleHeadAttention", "batch sizes differ: queries {} vs keys {}", shape_str(q.shape()), shape_str(k.shape()));
  // Scale (d_o)^-0.5 on q k^T: the default of scaled_dot_product_attention for width d_o.
  const AttentionOptions opt{.key_padding_mask = key_padding_mask,
                             .causal = causal,
                             .dropout = attention_dropout,
                             .training = is_training(),
                             .generator = &generator()};
  const Tensor a = scaled_dot_product_attention(to_heads(q), to_heads(k), to_heads(v), opt);
  return out_proj_->forward(from_heads(a));
}

Tensor SingleHeadAttention::forward(const Tensor& x, const Tensor& memory, const Tensor& key_padding_mask,
                                    bool causal, double attention_dropout) const {
  if (is_self()) {
    const std::vector<Tensor> qkv = project_self(x);
    return attend(qkv[0], qkv[1], qkv[2], key_padding_mask, causal, attention_dropout);
  }
  const Tensor q = project_query(x);
  if (memory.defined() && memory.dim() == 3 && x.dim() == 3 && memory.size(1) != x.size(1))
    fail("SingleHeadAttention", "batch sizes differ: queries {} vs encoder output {}", shape_str(x.shape()),
         shape_str(memory.shape()));
  const std::vector<Tensor> kv = project_memory(memory);
  return attend(q, kv[0], kv[1], key_padding_mask, causal, attention_dropout);
}

// ---- DelightBlock

DelightBlock::DelightBlock(const char* type_name, const DelightBlockConfig& cfg, bool decoder, Generator& gen)
    : Module(type_name), cfg_(cfg), decoder_(decoder) {
  const std::int64_t d_m = cfg_.d_m;
  if (d_m <= 0 || d_m % 2 != 0) fail(type_name, "d_m = {} must be positive and even", d_m);
  if (cfg_.ffn_reduction < 1 || d_m % cfg_.ffn_reduction != 0)
    fail(type_name, "d_m = {} is not divisible by ffn_reduction = {}", d_m, cfg_.ffn_reduction);
  for (double p : {cfg_.dropout, cfg_.attention_dropout, cfg_.activation_dropout, cfg_.ffn_dropout})
    check_dropout_probability(type_name, p);
  const std::int64_t d_o = d_m / 2, d_ffn = d_m / cfg_.ffn_reduction;
  dextra_ = register_module("dextra", std::make_shared<DExTraUnit>(delight_block_dextra_config(cfg_), gen));
  self_attn_ = register_module("self_attn", std::make_shared<SingleHeadAttention>(d_o, d_m, gen));
  self_attn_norm_ = register_module("self_attn_layer_norm", std::make_shared<LayerNorm>(d_m));
  if (decoder_ && cfg_.cross_attention) {
    encoder_attn_ = register_module("encoder_attn", std::make_shared<SingleHeadAttention>(d_m, d_m, d_o, d_m, gen));
    encoder_attn_norm_ = register_module("encoder_attn_layer_norm", std::make_shared<LayerNorm>(d_m));
  }
  fc1_ = register_module("fc1", std::make_shared<Linear>(d_m, d_ffn, LinearOptions{}, gen));
  fc2_ = register_module("fc2", std::make_shared<Linear>(d_ffn, d_m, LinearOptions{}, gen));
  final_norm_ = register_module("final_layer_norm", std::make_shared<LayerNorm>(d_m));
}

Tensor DelightBlock::add_residual(const Tensor& r, const Tensor& y, double p, const LayerNorm& norm) const {
  Tensor x = add(r, dropout(y, p, is_training(), generator()));
  return cfg_.pre_norm ? x : norm.forward(x);
}

Tensor DelightBlock::forward_block(const Tensor& x, const Tensor& self_padding_mask, const Tensor& encoder_out,
                                   const Tensor& encoder_padding_mask) const {
  if (x.dim() != 3 || x.size(2) != cfg_.d_m)
    fail(type_name(), "expected input [T, B, {}], got {}", cfg_.d_m, shape_str(x.shape()));
  if (!encoder_attn_ && (encoder_out.defined() || encoder_padding_mask.defined()))
    fail(type_name(), "this block has no cross-attention, but an encoder output was given");
  if (encoder_attn_ && !encoder_out.defined())
    fail(type_name(), "this block attends to an encoder output, but none was given");

  // Self-attention on the DExTra output (q, k and v all come from it).
  Tensor h = self_attn_->forward(dextra_->forward(pre(x, *self_attn_norm_)), Tensor(), self_padding_mask, decoder_,
                                 cfg_.attention_dropout);
  Tensor y = add_residual(x, h, cfg_.dropout, *self_attn_norm_);
  if (encoder_attn_) {
    h = encoder_attn_->forward(pre(y, *encoder_attn_norm_), encoder_out, encoder_padding_mask, false,
                               cfg_.attention_dropout);
    y = add_residual(y, h, cfg_.dropout, *encoder_attn_norm_);
  }
  return feed_forward(y);
}

Tensor DelightBlock::feed_forward(const Tensor& y) const {
  Tensor h = apply_activation(fc1_->forward(pre(y, *final_norm_)), cfg_.activation);
  h = fc2_->forward(dropout(h, cfg_.activation_dropout, is_training(), generator()));
  return add_residual(y, h, cfg_.ffn_dropout, *final_norm_);
}

// ---- incremental decoding

void DelightDecoderCache::select_rows(const Tensor& rows) {
  // Time-first tensors keep rows along dim 1, the padding mask [N, S] along dim 0.
  for (Tensor* t : {&self_k, &self_v, &encoder_k, &encoder_v})
    if (t->defined()) *t = index_select(*t, 1, rows);
  if (encoder_padding_mask.defined()) encoder_padding_mask = index_select(encoder_padding_mask, 0, rows);
}

DelightDecoderCache DelightBlock::start_cache_block(const Tensor& encoder_out, const Tensor& encoder_padding_mask) const {
  if (!encoder_attn_ && encoder_out.defined())
    fail(type_name(), "this block has no cross-attention, but an encoder output was given");
  if (encoder_attn_ && !encoder_out.defined())
    fail(type_name(), "this block attends to an encoder output, but none was given");
  DelightDecoderCache cache;
  if (encoder_attn_) {
    const std::vector<Tensor> kv = encoder_attn_->project_memory(encoder_out);
    cache.encoder_k = contiguous(kv[0]);
    cache.encoder_v = contiguous(kv[1]);
    cache.encoder_padding_mask = encoder_padding_mask;
  }
  return cache;
}

Tensor DelightBlock::forward_step_block(const Tensor& x, DelightDecoderCache& cache) const {
  if (x.dim() != 3 || x.size(0) != 1 || x.size(2) != cfg_.d_m)
    fail(type_name(), "forward_step takes one position [1, N, {}], got {}", cfg_.d_m, shape_str(x.shape()));
  if (is_training()) fail(type_name(), "forward_step is for decoding: call eval() first (dropout would differ from forward())");
  if (encoder_attn_ && !cache.encoder_k.defined())
    fail(type_name(), "the cache holds no encoder output: make it with start_cache(encoder_out)");
  const std::vector<Tensor> qkv = self_attn_->project_self(dextra_->forward(pre(x, *self_attn_norm_)));
  cache.self_k = cache.self_k.defined() ? concat({cache.self_k, qkv[1]}, 0) : contiguous(qkv[1]);
  cache.self_v = cache.self_v.defined() ? concat({cache.self_v, qkv[2]}, 0) : contiguous(qkv[2]);
  // The newest position attends to every cached one: no causal mask needed.
  Tensor y = add_residual(x, self_attn_->attend(qkv[0], cache.self_k, cache.self_v, Tensor(), false, 0.0), cfg_.dropout,
                          *self_attn_norm_);
  if (encoder_attn_) {
    const Tensor q = encoder_attn_->project_query(pre(y, *encoder_attn_norm_));
    y = add_residual(y, encoder_attn_->attend(q, cache.encoder_k, cache.encoder_v, cache.encoder_padding_mask, false, 0.0),
                     cfg_.dropout, *encoder_attn_norm_);
  }
  return feed_forward(y);
}

}  // namespace define::nn
