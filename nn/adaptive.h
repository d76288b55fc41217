// Adaptive input and adaptive softmax (spec §6, §5.2, §5.3, §2.7): a vocabulary split by frequency
// into bands (cluster 0 = the shortlist of the most frequent words, then the tail clusters), each
// band cheaper than the one before it.
//
// Two forms, as two pairs of classes:
//
// 1. fairseq / DeLighT form (AdaptiveInput, AdaptiveSoftmax; spec §6 "Released code").
//    Bands from `cutoffs` (+V appended): band i covers words [c_{i-1}, c_i) (c_{-1} = 0) and is
//    dim_i = floor(n / factor^i) wide.
//      AdaptiveInput: band i = Embedding(rows_i, dim_i) ~ N(0, dim_i^-0.5), times sqrt(dim_i)
//        (unless scale = false), then a bias-free projection dim_i -> n. Band 0 may skip its
//        projection (DeFINE's LSTM form, spec §5.3: band 0 is already n wide). Padding row: band 0.
//        Parameters: sum_i rows_i * dim_i + sum_{i projected} dim_i * n.
//      AdaptiveSoftmax (input width n): head = logits of the c_0 shortlist words plus one logit per
//        tail cluster; tail i = projection n -> dim_{i+1}, dropout, logits of its words. Dropout
//        (p = `dropout`) is also applied to the input before head and tails (fairseq).
//        Untied parameters: n * (c_0 + T) [+ c_0 + T head bias] + sum_i (n * dim_{i+1} +
//        dim_{i+1} * rows_{i+1}) [+ rows_{i+1} tail bias].
//        Tied to an AdaptiveInput (tie_weights): the shortlist word logits use band 0's table
//        (through an extra bias-free Linear(n -> dim_0) only if dim_0 != n), tail i's word logits
//        band i+1's table; with tie_projections tail i's projection is the transpose of band
//        i+1's input projection. What remains of the softmax's own: the cluster logits
//        Linear(n -> T, no bias) (= T * n, e.g. 2 * 128 = 256 for DeLighT WT-103), plus any
//        untied projections and biases.
//
// 2. Transformer-XL "projected" form with div_val = 1 (ProjectedAdaptiveInput,
//    ProjectedAdaptiveSoftmax; used by DeFINE Table 2, spec §5.3): ONE V x n table, words in
//    n-space, the model works in d_proj-space.
//      ProjectedAdaptiveInput: e = E[x] (n) -> Linear(n -> d_proj, no bias) when n != d_proj ->
//        times sqrt(d_proj) (unless scale = false). Parameters V * n (+ n * d_proj).
//      ProjectedAdaptiveSoftmax (input width d_proj): cluster c in 0..T has an output projection
//        P_c [d_proj, n] (h_c = h P_c, only when n != d_proj); head logits = h_0 [E[0:c_0];
//        cluster_weight]^T + [bias[0:c_0]; cluster_bias], tail i logits = h_{i+1}
//        E[c_i:c_{i+1}]^T + bias[c_i:c_{i+1}]. Own parameters: bias V, cluster weight T * n and
//        cluster bias T (= 3n + 3 for three tails), the table V * n unless tied, the projections.
//      Projection sharing (ProjectedTying::projections), with the input projection P_in:
//        HeadShared (default): P_0 IS P_in; P_1..P_T are each separate. Together with the input
//          that is FOUR distinct n x d_proj matrices for three tails: P_in(=P_0), P_1, P_2, P_3.
//          This is what reproduces DeFINE Table 2's counts (V n + V + 4 n d_proj + 3n + 3).
//        TailsShared: P_1..P_T ARE P_in, P_0 separate (Transformer-XL train.py's
//          tie_projs = [False, True, True, True]): two distinct matrices.
//        None: every P_c separate: T + 2 matrices.
//      Init as Transformer-XL: table and cluster weights N(0, 0.02), projections N(0, 0.01).
//
// Losses go through the fused adaptive-softmax kernel (autograd/adaptive_softmax.h): the rows are
// partitioned once by cluster (stable), and only the rows whose target falls in tail i go through
// tail i's projection and GEMM. log_prob() computes every row through every cluster: [N, V]
// log-probabilities (for evaluation, generation and checks).
//
// skip_init: allocate parameters without initialising them (their values are garbage) - for
// counting parameters of full-size layers cheaply or loading a checkpoint right after.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/softmax.h"
#include "nn/module.h"

namespace define::nn {

// The band layout of the fairseq form, validated: throws "<layer>: ..." naming the bad value.
struct AdaptiveBands {
  std::vector<std::int64_t> bounds;  // c_0 < c_1 < ... < c_T = V (the cutoffs with V appended)
  std::vector<std::int64_t> rows;    // rows_i = c_i - c_{i-1} (c_{-1} = 0)
  std::vector<std::int64_t> dims;    // dim_i = floor(n / factor^i), each >= 1
  std::int64_t clusters() const { return static_cast<std::int64_t>(bounds.size()); }  // T + 1
};
// `cutoffs` ascending in (0, V); a trailing V is accepted and ignored (fairseq appends it).
AdaptiveBands adaptive_bands(const char* layer, std::int64_t vocab, std::int64_t n,
                             const std::vector<std::int64_t>& cutoffs, double factor);

struct AdaptiveInputConfig {
  std::int64_t vocab = 0;              // V
  std::int64_t dim = 0;                // n: output width and band 0 width
  std::vector<std::int64_t> cutoffs{}; // e.g. {20000, 60000}
  double factor = 4.0;                 // band i is floor(n / factor^i) wide
  bool project_band0 = true;           // fairseq: true; DeFINE LSTM (spec §5.3): false
  bool scale = true;                   // rows of band i times sqrt(dim_i)
  std::int64_t padding_idx = -1;       // a band-0 row that reads as zeros and gets no gradient
  bool skip_init = false;
};

// Children: bands.0 .. bands.T, each with parameters "weight" [rows_i, dim_i] and (when
// projected) "projection" [n, dim_i] (Linear layout, dim_i -> n).
class AdaptiveInput : public Module {
 public:
  explicit AdaptiveInput(const AdaptiveInputConfig& cfg, Generator& gen = default_generator());

  // tokens int32/int64 of any shape, each in [0, V) -> [tokens..., n].
  Tensor forward(const Tensor& tokens) const;

  const AdaptiveInputConfig& config() const { return cfg_; }
  const AdaptiveBands& bands() const { return bands_; }
  // Band i's table [rows_i, dim_i] and projection [n, dim_i] (undefined for band 0 without one).
  const Tensor& embedding(std::size_t band) const;
  const Tensor& projection(std::size_t band) const;

 private:
  // Band `band` for the given in-band word indices: [count, n].
  Tensor embedding_op(std::size_t band, const Tensor& local_ids) const;

  AdaptiveInputConfig cfg_;
  AdaptiveBands bands_;
  std::vector<Tensor*> tables_, projections_;  // slots owned by the band children
  Tensor none_;
};

struct AdaptiveSoftmaxConfig {
  std::int64_t vocab = 0;              // V
  std::int64_t dim = 0;                // n: input width
  std::vector<std::int64_t> cutoffs{}; // as AdaptiveInputConfig (equal to it when tied)
  double factor = 4.0;                 // equal to the input's when tied
  double dropout = 0.0;                // on the input of head and tails, and after tail projections
  bool head_bias = false;              // a bias on the head logits (shortlist + cluster logits)
  bool tail_bias = false;              // a bias on each tail's word logits
  bool tie_weights = false;            // word tables from the AdaptiveInput passed to the constructor
  bool tie_projections = false;        // tail projections from it too (needs n equal to its n)
  bool skip_init = false;
};

// Children: head, with parameters "word_weight" ([c_0, n] own, or band 0's table [c_0, dim_0]
// when tied), "cluster_weight" [T, n] (T > 0), "input_projection" [dim_0, n] (tied and dim_0 != n)
// and "bias" [c_0 + T] (head_bias); tails.0 .. tails.{T-1}, each with "projection" ([dim_{i+1}, n]
// own, used as h P^T; or the tied input projection [n, dim_{i+1}], used as h P), "weight"
// [rows_{i+1}, dim_{i+1}] (own or band i+1's table) and "bias" [rows_{i+1}] (tail_bias).
// Tied tensors are registered here too (the same tensors, counted once by a parent module).
class AdaptiveSoftmax : public Module {
 public:
  // `tied` is required when cfg.tie_weights or cfg.tie_projections is set, and must match
  // vocab, cutoffs and factor; its tensors become parameters of this module too (shared).
  explicit AdaptiveSoftmax(const AdaptiveSoftmaxConfig& cfg, const AdaptiveInput* tied = nullptr,
                           Generator& gen = default_generator());

  // hidden [..., n], target int32/int64 [...] (same leading shape) -> the NLL, reduced. Rows whose
  // target is ignore_index contribute nothing (fairseq's adaptive_loss uses Sum with the padding
  // index).
  Tensor loss(const Tensor& hidden, const Tensor& target, Reduction reduction = Reduction::Mean,
              std::int64_t ignore_index = -100) const;
  // hidden [..., n] -> log-probabilities [..., V] (every row through every cluster).
  Tensor log_prob(const Tensor& hidden) const;

  const AdaptiveSoftmaxConfig& config() const { return cfg_; }
  const AdaptiveBands& bands() const { return bands_; }

 private:
  struct Tail {
    Tensor* projection = nullptr;
    bool projection_transposed = false;  // tied: [n, dim] used as h @ P
    Tensor* weight = nullptr;
    Tensor* bias = nullptr;
  };
  Tensor head_logits(const Tensor& h) const;
  Tensor tail_logits(std::size_t i, const Tensor& h, bool training) const;

  AdaptiveSoftmaxConfig cfg_;
  AdaptiveBands bands_;
  Tensor* cluster_weight_ = nullptr;
  Tensor* word_weight_ = nullptr;
  Tensor* head_bias_ = nullptr;
  Tensor* head_projection_ = nullptr;  // [dim_0, n] when tied and dim_0 != n
  std::vector<Tail> tails_;
};

// ---- Transformer-XL projected form (div_val = 1).

enum class ProjectedTying { HeadShared, TailsShared, None };

struct ProjectedAdaptiveConfig {
  std::int64_t vocab = 0;              // V
  std::int64_t dim = 0;                // n: width of the word table (d_embed)
  std::int64_t proj_dim = 0;           // d_proj: the model width (384 in DeFINE Table 2)
  std::vector<std::int64_t> cutoffs{}; // e.g. {20000, 40000, 200000}
  bool scale = true;                   // input: times sqrt(d_proj) (Transformer-XL's emb_scale)
  std::int64_t padding_idx = -1;       // input only
  double dropout = 0.0;                // softmax: on the input of head and tails
  bool tie_weights = true;             // softmax: the table of the ProjectedAdaptiveInput given
  ProjectedTying projections = ProjectedTying::HeadShared;  // with a tied input (see above)
  bool skip_init = false;
};

// Parameters "weight" [V, n] and (n != d_proj) "projection" [d_proj, n] (Linear layout n -> d_proj).
class ProjectedAdaptiveInput : public Module {
 public:
  explicit ProjectedAdaptiveInput(const ProjectedAdaptiveConfig& cfg, Generator& gen = default_generator());
  // tokens of any shape -> [tokens..., d_proj].
  Tensor forward(const Tensor& tokens) const;

  const ProjectedAdaptiveConfig& config() const { return cfg_; }
  const Tensor& weight() const { return *weight_; }
  const Tensor& projection() const { return projection_ ? *projection_ : none_; }  // undefined when n == d_proj

 private:
  ProjectedAdaptiveConfig cfg_;
  Tensor* weight_ = nullptr;
  Tensor* projection_ = nullptr;
  Tensor none_;
};

// Parameters: "weight" [V, n] (tied or own), "bias" [V], "cluster_weight" [T, n], "cluster_bias"
// [T], and "projections.0" .. "projections.T" [d_proj, n] where present and not shared.
class ProjectedAdaptiveSoftmax : public Module {
 public:
  // `tied` is required when cfg.tie_weights is set (or to share projections); it must match V, n,
  // d_proj and cutoffs.
  explicit ProjectedAdaptiveSoftmax(const ProjectedAdaptiveConfig& cfg, const ProjectedAdaptiveInput* tied = nullptr,
                                    Generator& gen = default_generator());

  // hidden [..., d_proj], target [...] -> reduced NLL (as AdaptiveSoftmax::loss).
  Tensor loss(const Tensor& hidden, const Tensor& target, Reduction reduction = Reduction::Mean,
              std::int64_t ignore_index = -100) const;
  // hidden [..., d_proj] -> [..., V] log-probabilities.
  Tensor log_prob(const Tensor& hidden) const;

  const ProjectedAdaptiveConfig& config() const { return cfg_; }
  const std::vector<std::int64_t>& bounds() const { return bounds_; }  // c_0 .. c_T = V
  // P_c [d_proj, n], or undefined when n == d_proj.
  const Tensor& projection(std::size_t cluster) const;

 private:
  Tensor cluster_logits(std::size_t cluster, const Tensor& h) const;

  ProjectedAdaptiveConfig cfg_;
  std::vector<std::int64_t> bounds_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor* cluster_weight_ = nullptr;
  Tensor* cluster_bias_ = nullptr;
  std::vector<Tensor*> projections_;  // one per cluster, null when n == d_proj
  Tensor none_;
};

}  // namespace define::nn
