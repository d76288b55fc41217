// Token representations of a language model, selectable by config (`model.input.type`), and the
// classifier tied to them. This is where the papers' comparison lives: the same context model
// with a standard embedding, a projective embedding, adaptive input, the DeFINE unit (paper form
// and its ablations, or the released define-iclr form) or DExTra in front of it.
//
//   type         input (tokens -> [.., out_dim])                          tied output works in
//   embedding    table V x n (out_dim = n)                                  n
//   projective   table V x n -> Linear n -> m                               n
//   define       table V x n -> DefineUnit (paper form, spec §11) -> m       n
//                (map: adaptive) AdaptiveInput -> n -> DefineUnit -> m      AdaptiveSoftmax (tied)
//   define-iclr  DExTraEmb in define-iclr mode (released DeFINE, §2.3/2.6)  n
//   dextra       DExTraEmb in dextra mode (DeLighT, §2.4/2.6)               n
//   adaptive     AdaptiveInput (bands, factor) -> n                          AdaptiveSoftmax (tied)
//   projected    Transformer-XL's input (div_val 1): table V x n, projected  ProjectedAdaptiveSoftmax
//                n -> m when they differ, times sqrt(m) (out_dim m)          (tied, m; cutoffs optional)
//                (define with map: projected) the same map -> DefineUnit     the same, in proj_dim
//                proj_dim -> m, as DeFINE Table 2 (spec §5.3)
//
// As in DeFINE Fig. 1 and the released code (§2.7), the classifier works in the map space: the
// context model's output (width h) goes through a bias-free Linear h -> n when h != n, then
// logits = x E^T + b with the map table E, or the tied adaptive softmax. The unit itself is never
// tied to the output. DeFINE over adaptive input is the paper's LSTM form (DeFINE Table 1a: the
// adaptive input is the map layer, the adaptive softmax is tied to its bands).
//
// Parameter names: input.map.weight, input.projected.{weight,projection} (projected inputs and maps), input.unit.layers.0.weight (define), input.dextra_emb.* (the
// released forms), input.adaptive.bands.* (adaptive input and adaptive maps), output.project_out.weight,
// output.bias, output.softmax.*.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/softmax.h"
#include "core/config.h"
#include "models/parameter_parts.h"
#include "nn/adaptive.h"
#include "nn/define_unit.h"
#include "nn/dextra_embedding.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace define::models {

enum class TokenInputKind { Embedding, Projective, Define, DefineIclr, DExTra, Adaptive, Projected };
TokenInputKind parse_token_input_kind(const std::string& name);
const char* to_string(TokenInputKind kind);

struct TokenInputConfig {
  TokenInputKind kind = TokenInputKind::Embedding;
  std::int64_t vocab = 0;
  std::int64_t map_dim = 0;   // n: the table width (and the tied classifier's width)
  std::int64_t out_dim = 0;   // m: what the context model reads (= n for embedding / adaptive)
  bool scale = false;         // multiply the map output by sqrt(n) (the released forms default on)
  std::optional<double> init_range;  // table rows ~ U(-r, r) (AWD-LSTM: 0.1); unset: N(0, n^-0.5)
  // define (paper form)
  nn::DefineConfig define;     // n and m are filled from map_dim / out_dim
  // define-iclr / dextra (released forms)
  double width_mult = 2.0;     // w: peak width n * w
  std::int64_t depth = 4;      // N
  std::int64_t max_groups = 1; // G
  nn::DExTraGroupRule group_rule = nn::DExTraGroupRule::Released;  // dextra
  nn::GroupedLinearNorm norm = nn::GroupedLinearNorm::Chunk;
  nn::Activation activation = nn::Activation::Swish;
  double unit_dropout = 0.0;
  // projective, define, define-iclr, dextra: run the unit once per distinct token of a batch and
  // gather its rows back to the positions (see TokenInput::forward).
  bool distinct_tokens = true;
  // adaptive, and define with map = adaptive
  bool adaptive_map = false;  // define: the map layer is an AdaptiveInput instead of one table
  std::vector<std::int64_t> cutoffs;
  double factor = 4.0;
  // projected, and define with map = projected (Transformer-XL's ProjectedAdaptiveInput)
  bool projected_map = false;  // define: the map layer is a ProjectedAdaptiveInput
  std::int64_t proj_dim = 0;   // its output width (what the unit reads; the tied softmax's width)
  // Which of the tied softmax's projections are the input's: head (the head's; DeFINE Table 2's
  // counts), tails (every tail's; Transformer-XL's tie_projs = [False, True, True, True]), none.
  nn::ProjectedTying projection_tying = nn::ProjectedTying::HeadShared;
};

// Reads the `model.input` section. Keys (defaults in brackets):
//   type [embedding]; dim (n, required); out_dim [dim]; scale (embedding: [embedding_scaled], the
//   model type's default; see below); init_range;
//   define:      k, depth, g_max, variant [define], norm [chunk], activation [swish], dropout [0],
//                init [released] (xavier: per-group Xavier, see nn/grouped_linear.h), reduce_skip [false],
//                map [table] (adaptive: AdaptiveInput bands as the map layer, with cutoffs, factor
//                and scale [true: band i times sqrt(dim_i), once])
//   define-iclr: k (peak width; w = k / n), depth, max_groups, norm, activation, dropout
//   dextra:      width_mult [2], depth [4], group_rule [released] (or paper, nn/dextra.h),
//                max_groups [by the group rule from out_dim], norm, activation, dropout
//   adaptive:    cutoffs, factor [4], scale [true: band i times sqrt(dim_i)]
//   projected:   out_dim [dim], cutoffs [none], scale [true: times sqrt(out_dim)], tie_projections
//                [head] (or tails, as Transformer-XL's train.py ties them, or none)
//   every input with a unit (projective, define, define-iclr, dextra): distinct_tokens [true]
//   define with map = projected: proj_dim [out_dim], cutoffs [none], tie_projections [head]
// `embedding_scaled` is what a plain embedding's scale defaults to: true for the Transformers (fairseq's
// translation Transformer and Transformer-XL multiply embeddings by sqrt(dim)), false for the LSTM
// LM (AWD-LSTM does not).
TokenInputConfig read_token_input_config(const Config& section, std::int64_t vocab, bool embedding_scaled = false);

// The distinct ids of `tokens` in increasing order ([U], on the tokens' device) and, for every
// position, the index of its id among them (tokens' shape, int64): ids[positions] == tokens.
struct DistinctIds {
  Tensor ids, positions;
};
DistinctIds distinct_ids(const Tensor& tokens);

class TokenInput : public nn::Module {
 public:
  explicit TokenInput(const TokenInputConfig& cfg, Generator& gen = default_generator());

  // tokens (int32/int64, any shape) -> [tokens..., out_dim]. An input with a unit (projective,
  // define, define-iclr, dextra) maps each token on its own, so with `distinct_tokens` it runs the
  // unit once per distinct id of the batch and gathers the rows to the positions; backward then
  // sums the gradients of equal ids (the gather's scatter-add) before the unit's backward. Same
  // result as once per position up to float summation order, at about half the unit's cost (a
  // PTB batch of 20 x 35 holds 51% distinct ids on average). With dropout inside the unit in training,
  // every position draws its own mask, so that case runs once per position.
  Tensor forward(const Tensor& tokens) const;
  // The unit (map, then projection / DeFINE / DExTra) on every position of `ids`, without the
  // distinct-token gather: what forward() computes, one row per position.
  Tensor forward_per_position(const Tensor& ids) const;

  const TokenInputConfig& config() const { return cfg_; }
  std::int64_t out_dim() const { return cfg_.out_dim; }
  // The V x n table a tied classifier reuses (undefined for adaptive input and adaptive maps).
  const Tensor& table() const;
  // The map layer's output for `ids` (the table rows, or the adaptive bands projected to n), scaled
  // like forward() scales it: what the unit reads. [ids..., n].
  Tensor map_rows(const Tensor& ids) const;
  // Where the parameters live.
  Device device() const;
  const nn::AdaptiveInput* adaptive() const { return adaptive_.get(); }
  const nn::ProjectedAdaptiveInput* projected() const { return projected_.get(); }
  // Which of this module's parameters are the token-representation unit and which the
  // input-output tables, for names under `prefix` ("input.").
  PartRules part_rules(const std::string& prefix) const;

  // ---- the token cache (paper §3.4): after training, the unit's output depends on the token
  // id only, so it can be precomputed once for the whole vocabulary and looked up instead.
  // Whether this input has a unit in front of the context model (projective, define,
  // define-iclr, dextra); embedding and adaptive input have nothing to cache.
  bool has_unit() const;
  // The unit's output for every id, [V, out_dim], computed in chunks without a graph. Needs eval
  // mode (dropout inside the unit would make rows random); throws naming the input type when
  // there is no unit.
  Tensor compute_cache() const;
  // From now on forward() looks rows up in `table` [V, out_dim] instead of running map + unit
  // (the tied classifier still reads the map table). An undefined tensor switches back. The
  // table serves eval only: forward() in training mode with a table set throws, and so does
  // forward() after any of this input's parameters changed (the table would be stale).
  void use_cache(Tensor table);
  bool uses_cache() const { return cache_.defined(); }

 private:
  TokenInputConfig cfg_;
  std::shared_ptr<nn::Embedding> map_;
  std::shared_ptr<nn::Linear> projection_;        // projective
  std::shared_ptr<nn::DefineUnit> define_;        // define (paper form)
  std::shared_ptr<nn::DExTraEmb> dextra_;         // define-iclr, dextra
  std::shared_ptr<nn::AdaptiveInput> adaptive_;   // adaptive
  std::shared_ptr<nn::ProjectedAdaptiveInput> projected_;  // projected, or define's projected map
  Tensor cache_;                                  // use_cache(): [V, out_dim], or undefined
  // Each parameter's storage and version when the cache was set: forward() refuses a cache that
  // a later update made stale.
  struct CachedFrom {
    std::string name;
    std::shared_ptr<Storage> storage;
    std::uint64_t version;
  };
  std::vector<CachedFrom> cached_from_;
  void check_cache_current() const;
};

struct TiedOutputConfig {
  std::int64_t hidden_dim = 0;  // width of the context model's output
  bool bias = true;             // logits bias (V) for the table classifier
  double adaptive_dropout = 0;  // adaptive softmax: dropout on its input and tail projections
};

// The classifier tied to a TokenInput: logits = project_out(h) E^T + b, or the tied adaptive
// softmax for adaptive input, or the tied projected adaptive softmax (head projection shared with
// the input's, Transformer-XL / DeFINE Table 2) for projected inputs and maps, whose space is
// proj_dim rather than n.
class TiedOutput : public nn::Module {
 public:
  TiedOutput(const TokenInput& input, const TiedOutputConfig& cfg, Generator& gen = default_generator());

  // hidden [..., hidden_dim], target [...] -> mean (or summed) NLL over non-ignored rows.
  Tensor loss(const Tensor& hidden, const Tensor& target, Reduction reduction = Reduction::Mean) const;
  // hidden [..., hidden_dim] -> log-probabilities [..., V].
  Tensor log_prob(const Tensor& hidden) const;
  // hidden [..., hidden_dim] -> logits [..., V] of the table classifier (what a label-smoothed
  // loss and beam search read). The adaptive softmaxes have no such logits: throws for them.
  Tensor logits(const Tensor& hidden) const;
  // The label-smoothed cross entropy of logits(hidden) against target, rows whose target is
  // ignore_index skipped, without building the logits' gradient (linear_cross_entropy);
  // `unsmoothed` as there. The table classifier only: an adaptive softmax throws, as in logits().
  Tensor smoothed_loss(const Tensor& hidden, const Tensor& target, std::int64_t ignore_index, double label_smoothing,
                       Reduction reduction, Tensor* unsmoothed = nullptr) const;

 private:
  Tensor to_map_space(const Tensor& hidden) const;
  std::shared_ptr<nn::Linear> project_out_;  // hidden -> n, when they differ
  Tensor table_;                              // the input's table (shared tensor)
  Tensor* bias_ = nullptr;
  std::shared_ptr<nn::AdaptiveSoftmax> softmax_;
  std::shared_ptr<nn::ProjectedAdaptiveSoftmax> projected_softmax_;
};

}  // namespace define::models
