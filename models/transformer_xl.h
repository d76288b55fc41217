// Transformer-XL language model (Dai et al. 2019) with a selectable token representation
// (models/token_representation.h), as the DeFINE paper trains it (Table 2):
//
//   x_0 = dropout(input(tokens))                 [T, B, d_model]; input out_dim must be d_model
//   r   = dropout(pos(klen-1 .. 0, clamped))     [Tk, d_model] sinusoids of relative distances
//   x_l = layer_l(x_{l-1}, memory_{l-1}, r)      l = 1 .. n_layer
//   loss = output(dropout(x_L), targets)         tied to the input (projected adaptive softmax,
//                                                adaptive softmax, or the table's logits)
//
// A layer (the reference code's RelPartialLearnableDecoderLayer):
//   h    = [memory; x] (memory: the previous window's input to this layer, no gradient)
//   q, k, v = split heads of h W_qkv (bias-free, n_head x d_head each; q of the last T rows)
//   r_k  = r W_r (bias-free), per head
//   a    = relative_attention(q, k, v, r_k, u, w)  (autograd/rel_attention.h: causal over
//          memory + segment, same_length as a window of mem_len keys, dropout dropatt)
//   x    = LayerNorm(x + dropout(a W_o))          (pre_lnorm: x + dropout(LayerNorm(x) ...))
//   x    = LayerNorm(x + dropout(W_2 dropout(relu(W_1 x + b_1)) + b_2))
// u and w (r_w_bias, r_r_bias: [n_head, d_head]) are two global biases shared by every layer,
// or one pair per layer with untie_r.
//
// Memory: after each window, layer l's input (l = 0 .. n_layer - 1) keeps its last mem_len
// positions (across the window boundary), detached: the state "mem<l>" [M, B, d_model].
// Evaluation may use its own memory length (eval_mem_len, or set_eval_memory) and clamp_len /
// same_length as the reference evaluation scripts do.
//
// Parameter names: input.*, layers.<l>.attn.{qkv,r_net,o_net}.weight, layers.<l>.attn.norm.*,
// layers.<l>.ff.{fc1,fc2}.*, layers.<l>.ff.norm.*, r_w_bias / r_r_bias (or per layer
// layers.<l>.attn.r_w_bias), output.*. Parts: the DeFINE unit, "context model" = the layers and
// the biases, "input-output" = the tables, projections and softmax.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.h"
#include "core/factory.h"
#include "models/language_model.h"
#include "models/token_representation.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"

namespace define::models {

struct TransformerXLConfig {
  TokenInputConfig input;  // out_dim must be d_model
  std::int64_t d_model = 410, n_head = 10, d_head = 41, d_inner = 2100, n_layer = 16;
  double dropout = 0.1;    // embeddings, positions, attention output, feed-forward, final output
  double dropatt = 0.0;    // attention probabilities
  bool pre_lnorm = false;
  bool untie_r = false;
  std::int64_t mem_len = 150;
  std::int64_t clamp_len = 0;  // 0: no clamping of relative distances
  bool same_length = false;
  // Evaluation (the reference scripts evaluate with a longer memory): 0 / unset = as training.
  std::int64_t eval_mem_len = 0, eval_clamp_len = 0;
  bool eval_same_length = false;
  double adaptive_dropout = 0.0;
  // Activation recomputation: each layer keeps only its input during training and runs again in
  // backward (autograd/recompute.h): the activation memory of one layer instead of n_layer.
  bool recompute = false;
  // model.init: xavier (define's defaults: Xavier-uniform Linear weights, unit layer-norm gains) or
  // reference (the reference code's weights_init: the layers' Linear weights N(0, 0.02), biases 0,
  // layer-norm gains N(1, 0.02)). The token input keeps its own init either way (the projected input
  // already draws the reference's N(0, 0.02) tables and N(0, 0.01) projections).
  bool reference_init = false;
};

// Reads the `model` section: input (read_token_input_config), d_model, n_head, d_head, d_inner,
// n_layer, dropout, dropatt, pre_lnorm, untie_r, mem_len, clamp_len, same_length, eval_mem_len,
// eval_clamp_len, eval_same_length, adaptive_dropout, recompute, init [xavier] (or reference).
TransformerXLConfig read_transformer_xl_config(const Config& model, std::int64_t vocab);

// Transformer-XL's sinusoids of the distances [Tk] (the pos_seq values): row p = [sin(d_p f_i),
// cos(d_p f_i)] with f_i = 10000^(-2i / dim), i < dim / 2 (computed in double, then cast).
Tensor relative_positions(const std::vector<double>& distances, std::int64_t dim, TensorOptions opt = {});

class RelLayer;

class TransformerXL : public LanguageModel {
 public:
  explicit TransformerXL(const TransformerXLConfig& cfg, Generator& gen = default_generator());

  Output forward(const Tensor& tokens, const Tensor& targets, const LmState& state = {}) override;
  std::pair<Tensor, LmState> log_prob(const Tensor& tokens, const LmState& state = {}) override;
  std::int64_t state_batch_dim(const std::string& /*name*/) const override { return 1; }  // mem [M, B, d]
  void set_eval_memory(std::int64_t mem_len) override;

  const TransformerXLConfig& config() const { return cfg_; }
  const TokenInput* token_input() const override { return input_.get(); }
  PartRules part_rules() const override;

  // The last layer's output [T, B, d_model] (before the final dropout) and the new memory.
  std::pair<Tensor, LmState> features(const Tensor& tokens, const LmState& state);

 private:
  TransformerXLConfig cfg_;
  std::shared_ptr<TokenInput> input_;
  std::vector<std::shared_ptr<RelLayer>> layers_;
  Tensor* r_w_bias_ = nullptr;  // shared biases (null with untie_r)
  Tensor* r_r_bias_ = nullptr;
  std::shared_ptr<TiedOutput> output_;
};

}  // namespace define::models
