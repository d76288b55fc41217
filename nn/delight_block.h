// DeLighT blocks (spec §4.2) and the model-level rules that size them: block-wise scaling (§4.3)
// and the group cap G (§4.1).
//
// Encoder block, d_o = d_m / 2 (inputs and outputs time-first [T, B, d_m]):
//   r = x; (pre-norm: x = LN(x))
//   x = DExTra(x)                                  d_m -> d_o (depth N_b, width w_b, G, shuffle)
//   q, k, v = chunk3(qkv_proj(x))                   one stacked Linear d_o -> 3 d_o with bias
//   x = out_proj(softmax(q k^T / sqrt(d_o) + masks) v)   single head, Linear d_o -> d_m
//   x = r + Dropout(x); (post-norm: x = LN(x))
//   r = x; (pre LN); x = fc2(Dropout_act(act(fc1(x)))); x = r + Dropout_ffn(x); (post LN)
// The light FFN is d_m -> d_m / ffn_reduction -> d_m. The decoder block adds, between the two,
// attention over the encoder output: q = q_proj(x) (d_m -> d_o), k, v = chunk2(kv_proj(enc))
// (d_m -> 2 d_o), out_proj d_o -> d_m, residual dropout, its own LayerNorm. Its self-attention is
// causal. A decoder block without cross-attention is the LM's block (§5.2).
//
// Parameter names follow fairseq's layer: dextra.*, self_attn.qkv_proj.*, self_attn.out_proj.*,
// self_attn_layer_norm.*, encoder_attn.{q_proj,kv_proj,out_proj}.*, encoder_attn_layer_norm.*,
// fc1.*, fc2.*, final_layer_norm.*.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/dextra.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::nn {

// Block-wise scaling over B blocks: depth N_b = int(linspace(N_min, N_max, B)[b]) (truncated, as
// numpy's integer linspace) and width w_b = round(linspace(w_m, w_m + N_max / N_min - 1, B)[b], 3).
struct BlockScaling {
  std::vector<std::int64_t> depths;
  std::vector<double> widths;
};
BlockScaling block_wise_scaling(std::int64_t min_depth, std::int64_t max_depth, double width_mult, std::int64_t blocks);

struct DelightBlockConfig {
  std::int64_t d_m = 0;
  std::int64_t depth = 4;          // N_b of the block's DExTra
  double width_mult = 2.0;         // w_b: the DExTra's widest layer is d_m * w_b
  std::int64_t max_groups = 0;     // G; 0: dextra_max_groups(d_m, group_rule)
  DExTraGroupRule group_rule = DExTraGroupRule::Released;
  std::int64_t ffn_reduction = 4;  // light FFN hidden width d_m / ffn_reduction
  bool pre_norm = false;           // NMT archs: post-norm; the LM forces pre-norm
  bool cross_attention = true;     // decoder blocks only: attend to an encoder output
  GroupedLinearNorm dextra_norm = GroupedLinearNorm::Chunk;
  Activation activation = Activation::Swish;  // DExTra layers and the FFN
  bool shuffle = true;                        // GLT shuffle inside the DExTra
  double dropout = 0.0;             // on each attention output before the residual add
  double attention_dropout = 0.0;   // on the attention probabilities
  double activation_dropout = 0.0;  // inside the FFN, after the activation
  double ffn_dropout = 0.0;         // on the FFN output before the residual add
  double dextra_dropout = 0.0;      // after every layer inside the DExTra
};

// The DExTra of a block: d_m -> d_m/2 with p = d_m/2 (dextra mode).
DExTraConfig delight_block_dextra_config(const DelightBlockConfig& cfg);

// Single-head attention of DeLighT. Self: one stacked qkv projection of the (DExTra) input;
// cross: q from the query input, k and v from one stacked projection of the memory.
class SingleHeadAttention : public Module {
 public:
  // Self-attention over x [T, B, proj_dim]; output [T, B, out_dim].
  SingleHeadAttention(std::int64_t proj_dim, std::int64_t out_dim, Generator& gen = default_generator());
  // Cross-attention: queries [T, B, query_dim], memory [S, B, memory_dim]; output [T, B, out_dim].
  SingleHeadAttention(std::int64_t query_dim, std::int64_t memory_dim, std::int64_t proj_dim, std::int64_t out_dim,
                      Generator& gen = default_generator());

  // key_padding_mask: undefined or [B, S] (nonzero = padded key). memory undefined for self.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& key_padding_mask, bool causal,
                 double attention_dropout) const;

  // forward() in halves, for incremental decoding (a decoder caches the keys and values of earlier
  // positions and of the encoder output instead of recomputing them). All time-first.
  // Self: x [T, B, proj_dim] -> q, k, v [T, B, proj_dim].
  std::vector<Tensor> project_self(const Tensor& x) const;
  // Cross: queries [T, B, query_dim] -> [T, B, proj_dim]; memory [S, B, memory_dim] -> k, v.
  Tensor project_query(const Tensor& x) const;
  std::vector<Tensor> project_memory(const Tensor& memory) const;
  // q [T, B, proj_dim] over k, v [S, B, proj_dim] -> out_proj(attention) [T, B, out_dim].
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask, bool causal,
                double attention_dropout) const;

  bool is_self() const { return qkv_proj_ != nullptr; }

 private:
  std::shared_ptr<Linear> qkv_proj_, q_proj_, kv_proj_, out_proj_;
};

// What a decoder block keeps between steps of incremental decoding: the self-attention keys and
// values of every earlier target position ([t, N, d_o], growing by one position a step), those of
// the encoder output ([S, N, d_o], projected once) and the encoder's padding mask ([N, S]).
struct DelightDecoderCache {
  Tensor self_k, self_v;
  Tensor encoder_k, encoder_v;
  Tensor encoder_padding_mask;  // undefined or [N, S]
  // Keeps rows `rows` ([N'] int64, on the cache's device) of every tensor, in that order: beam
  // search's reordering after each step.
  void select_rows(const Tensor& rows);
};

// What the encoder and decoder blocks share; build one of the two below.
class DelightBlock : public Module {
 public:
  const DelightBlockConfig& config() const { return cfg_; }
  const DExTraUnit& dextra() const { return *dextra_; }
  bool has_cross_attention() const { return encoder_attn_ != nullptr; }

 protected:
  DelightBlock(const char* type_name, const DelightBlockConfig& cfg, bool decoder, Generator& gen);
  // The whole block: causal self-attention for the decoder, cross-attention when built with it.
  Tensor forward_block(const Tensor& x, const Tensor& self_padding_mask, const Tensor& encoder_out,
                       const Tensor& encoder_padding_mask) const;
  // Incremental decoding of a decoder block (see DelightDecoderBlock).
  DelightDecoderCache start_cache_block(const Tensor& encoder_out, const Tensor& encoder_padding_mask) const;
  Tensor forward_step_block(const Tensor& x, DelightDecoderCache& cache) const;

 private:
  // The light FFN sublayer with its residual: y -> y + Dropout(fc2(Dropout_act(act(fc1(y))))).
  Tensor feed_forward(const Tensor& y) const;
  // r + dropout(y), then the post-norm when configured.
  Tensor add_residual(const Tensor& r, const Tensor& y, double p, const LayerNorm& norm) const;
  Tensor pre(const Tensor& x, const LayerNorm& norm) const { return cfg_.pre_norm ? norm.forward(x) : x; }
  DelightBlockConfig cfg_;
  bool decoder_;
  std::shared_ptr<DExTraUnit> dextra_;
  std::shared_ptr<SingleHeadAttention> self_attn_;
  std::shared_ptr<LayerNorm> self_attn_norm_;
  std::shared_ptr<SingleHeadAttention> encoder_attn_;  // decoder with cross-attention only
  std::shared_ptr<LayerNorm> encoder_attn_norm_;
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<LayerNorm> final_norm_;
};

class DelightEncoderBlock : public DelightBlock {
 public:
  // cfg.cross_attention is ignored (an encoder block has none).
  explicit DelightEncoderBlock(const DelightBlockConfig& cfg, Generator& gen = default_generator())
      : DelightBlock("DelightEncoderBlock", cfg, false, gen) {}
  // x [T, B, d_m], key_padding_mask undefined or [B, T] (nonzero = padding) -> [T, B, d_m].
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) const {
    return forward_block(x, key_padding_mask, Tensor(), Tensor());
  }
};

class DelightDecoderBlock : public DelightBlock {
 public:
  explicit DelightDecoderBlock(const DelightBlockConfig& cfg, Generator& gen = default_generator())
      : DelightBlock("DelightDecoderBlock", cfg, true, gen) {}
  // x [T, B, d_m] (causal self-attention). With cross-attention: encoder_out [S, B, d_m] and
  // encoder_padding_mask undefined or [B, S]; without: both undefined.
  Tensor forward(const Tensor& x, const Tensor& encoder_out = Tensor(),
                 const Tensor& encoder_padding_mask = Tensor()) const {
    return forward_block(x, Tensor(), encoder_out, encoder_padding_mask);
  }

  // Incremental decoding. start_cache projects the encoder output [S, N, d_m] (undefined: a block
  // without cross-attention) once; forward_step then takes the next position's input x [1, N, d_m],
  // appends its keys and values to the cache and returns that position's output, which equals
  // the last row of forward() over the whole prefix (tests/models/translation_model_test.cpp).
  // Eval mode only: dropout would make the two differ.
  DelightDecoderCache start_cache(const Tensor& encoder_out, const Tensor& encoder_padding_mask = Tensor()) const {
    return start_cache_block(encoder_out, encoder_padding_mask);
  }
  Tensor forward_step(const Tensor& x, DelightDecoderCache& cache) const { return forward_step_block(x, cache); }
};

}  // namespace define::nn
