// Adaptive input / adaptive softmax layers (nn/adaptive.h). The layers only produce logits
// (ordinary GEMMs); the row partition by cluster and the fused loss are the adaptive-softmax op
// family (autograd/adaptive_softmax.h). Initialisation follows each form's released code:
// fairseq (tables N(0, dim^-0.5), every projection and untied weight xavier-uniform, biases 0)
// and Transformer-XL (tables and cluster weights N(0, 0.02), projections N(0, 0.01), biases 0).
#include "nn/adaptive.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "autograd/adaptive_softmax.h"
#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/embedding.h"
#include "autograd/grad_mode.h"
#include "autograd/index.h"
#include "autograd/matmul.h"
#include "autograd/views.h"
#include "core/factory.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace define::nn {
namespace {

// A parameter-holding child with no forward of its own (a band, the head, a tail): gives the
// parameters their dotted names ("bands.2.projection") without a layer class per role.
class ParameterGroup : public Module {
 public:
  explicit ParameterGroup(const char* type) : Module(type) {}
  Tensor* add(const std::string& name, Tensor value) { return &register_parameter(name, std::move(value)); }
};

// Draws a parameter, or only allocates it under skip_init (cheap: the memory is never touched).
Tensor draw(bool skip_init, const Shape& shape, const std::function<Tensor()>& init) {
  return skip_init ? empty(shape) : init();
}

Tensor table_init(bool skip_init, std::int64_t rows, std::int64_t dim, double std, Generator& gen) {
  return draw(skip_init, {rows, dim}, [&] { return init::normal({rows, dim}, 0.0, std, gen); });
}

// Xavier-uniform [out, in] (fairseq's init of every untied adaptive-softmax weight and projection).
Tensor xavier(bool skip_init, std::int64_t out, std::int64_t in, Generator& gen) {
  return draw(skip_init, {out, in}, [&] { return init::xavier_uniform({out, in}, in, out, gen); });
}

Tensor zeros_param(bool skip_init, std::int64_t n) { return skip_init ? empty({n}) : zeros({n}); }

std::vector<std::int64_t> with_vocab(const char* layer, std::int64_t vocab, std::vector<std::int64_t> cutoffs) {
  if (vocab <= 0) fail(layer, "vocabulary size must be positive, got {}", vocab);
  if (!cutoffs.empty() && cutoffs.back() == vocab) cutoffs.pop_back();  // fairseq appends V itself
  std::int64_t prev = 0;
  for (std::int64_t c : cutoffs) {
    if (c <= prev || c >= vocab)
      fail(layer, "cutoffs must increase strictly within (0, {}), got {} after {}", vocab, c, prev);
    prev = c;
  }
  cutoffs.push_back(vocab);
  return cutoffs;
}

// The rows of a [..., width] tensor: [N, width], with the layer's name in the error.
Tensor as_rows(const char* layer, const Tensor& x, std::int64_t width, const char* what) {
  if (x.dim() < 1 || x.size(-1) != width) fail(layer, "expected {} [..., {}], got {}", what, width, shape_str(x.shape()));
  return reshape(x, {x.numel() / width, width});
}

Shape with_last(Shape leading, std::int64_t last) {
  leading.push_back(last);
  return leading;
}

Shape leading_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

// The loss path shared by both softmax forms: partition rows by the cluster of their target, run
// the head over every row and tail i over its rows only, then the fused loss.
struct AdaptiveLossParts {
  const char* layer;
  std::int64_t width;                    // input width
  const std::vector<std::int64_t>& bounds;
  double dropout;
  bool training;
  Generator& gen;
  std::function<Tensor(const Tensor&)> head;                // [N, width] -> [N, c_0 + T]
  std::function<Tensor(std::size_t, const Tensor&)> tail;   // tail i of [N_i, width] -> [N_i, words]
};

Tensor adaptive_loss(const AdaptiveLossParts& p, const Tensor& hidden, const Tensor& target, Reduction reduction,
                     std::int64_t ignore_index) {
  const Tensor h0 = as_rows(p.layer, hidden, p.width, "hidden");
  if (target.shape() != leading_shape(hidden))
    fail(p.layer, "target of shape {} does not match hidden of shape {}", shape_str(target.shape()),
         shape_str(hidden.shape()));
  const Tensor t = reshape(target, {h0.size(0)});
  const kernels::AdaptivePartition part = kernels::adaptive_partition(t, p.bounds, ignore_index, p.layer);
  const Tensor h = dropout(h0, p.dropout, p.training, p.gen);
  const Tensor head = p.head(h);
  std::vector<Tensor> tails, tail_rows;
  for (std::size_t i = 0; i + 1 < p.bounds.size(); ++i) {
    const Tensor& rows = part.rows[i + 1];
    tail_rows.push_back(rows);
    // Only the rows whose target lies in tail i go through its projection and GEMM.
    tails.push_back(part.counts[i + 1] > 0 ? p.tail(i, index_select(h, 0, rows))
                                           : empty({0, p.bounds[i + 1] - p.bounds[i]}, {h.dtype(), h.device()}));
  }
  return adaptive_softmax_loss(head, tails, tail_rows, t, p.bounds, ignore_index, reduction);
}

Tensor adaptive_log_prob(const char* layer, const Tensor& hidden, std::int64_t width,
                         const std::vector<std::int64_t>& bounds, const std::function<Tensor(const Tensor&)>& head_fn,
                         const std::function<Tensor(std::size_t, const Tensor&)>& tail_fn) {
  const Tensor h = as_rows(layer, hidden, width, "hidden");
  std::vector<Tensor> tails;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) tails.push_back(tail_fn(i, h));
  const Tensor lp = adaptive_log_softmax(head_fn(h), tails, bounds);
  return reshape(lp, with_last(leading_shape(hidden), bounds.back()));
}

// tokens of any shape, int32/int64.
Tensor flat_tokens(const char* layer, const Tensor& tokens) {
  if (!tokens.defined() || !is_integral(tokens.dtype()))
    fail(layer, "tokens must be an int32 or int64 tensor");
  return reshape(tokens, {tokens.numel()});
}

}  // namespace

// ---------------------------------------------------------------------------------------------

AdaptiveBands adaptive_bands(const char* layer, std::int64_t vocab, std::int64_t n,
                             const std::vector<std::int64_t>& cutoffs, double factor) {
  if (n <= 0) fail(layer, "width n must be positive, got {}", n);
  if (!(factor >= 1.0)) fail(layer, "factor must be at least 1, got {}", factor);
  AdaptiveBands b;
  b.bounds = with_vocab(layer, vocab, cutoffs);
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < b.bounds.size(); ++i) {
    const auto dim = static_cast<std::int64_t>(std::floor(double(n) / std::pow(factor, double(i))));
    if (dim < 1) fail(layer, "band {} would be floor({} / {}^{}) = 0 wide", i, n, factor, i);
    b.rows.push_back(b.bounds[i] - prev);
    b.dims.push_back(dim);
    prev = b.bounds[i];
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// AdaptiveInput

AdaptiveInput::AdaptiveInput(const AdaptiveInputConfig& cfg, Generator& gen)
    : Module("AdaptiveInput"), cfg_(cfg), bands_(adaptive_bands("AdaptiveInput", cfg.vocab, cfg.dim, cfg.cutoffs, cfg.factor)) {
  if (cfg.padding_idx < -1 || cfg.padding_idx >= bands_.bounds[0])
    fail("AdaptiveInput", "padding_idx {} must be -1 or a shortlist word in [0, {})", cfg.padding_idx,
         bands_.bounds[0]);
  auto list = register_module("bands", std::make_shared<ModuleList>());
  for (std::size_t i = 0; i < bands_.dims.size(); ++i) {
    auto band = list->push_back(std::make_shared<ParameterGroup>("AdaptiveInputBand"));
    const std::int64_t dim = bands_.dims[i];
    Tensor table = table_init(cfg.skip_init, bands_.rows[i], dim, 1.0 / std::sqrt(double(dim)), gen);
    if (i == 0 && cfg.padding_idx >= 0 && !cfg.skip_init) {
      NoGradGuard no_grad;
      fill_(select(table, 0, cfg.padding_idx), 0.0);  // padding reads as zeros (band 0 only, as fairseq)
    }
    tables_.push_back(band->add("weight", table));
    projections_.push_back(i == 0 && !cfg.project_band0 ? nullptr
                                                        : band->add("projection", xavier(cfg.skip_init, cfg.dim, dim, gen)));
  }
}

const Tensor& AdaptiveInput::embedding(std::size_t band) const { return *tables_.at(band); }
const Tensor& AdaptiveInput::projection(std::size_t band) const {
  return projections_.at(band) ? *projections_[band] : none_;
}

Tensor AdaptiveInput::forward(const Tensor& tokens) const {
  const Tensor flat = flat_tokens("AdaptiveInput", tokens);
  const Shape out_shape = with_last(tokens.shape(), cfg_.dim);
  const Tensor& first = *tables_[0];
  if (flat.numel() == 0) return zeros(out_shape, {first.dtype(), first.device()});
  // No index is ignored: a sentinel no token can equal.
  const kernels::AdaptivePartition part =
      kernels::adaptive_partition(flat, bands_.bounds, std::numeric_limits<std::int64_t>::min(), "AdaptiveInput");
  std::vector<Tensor> pieces;  // band outputs in cluster-sorted row order
  for (std::size_t i = 0; i < tables_.size(); ++i) {
    if (part.counts[i] == 0) continue;
    pieces.push_back(embedding_op(i, part.local[i]));
  }
  const Tensor sorted = pieces.size() == 1 ? pieces[0] : concat(pieces, 0);
  return reshape(index_select(sorted, 0, part.position), out_shape);
}

Tensor AdaptiveInput::embedding_op(std::size_t band, const Tensor& local_ids) const {
  Tensor e = define::embedding(*tables_[band], local_ids, band == 0 ? cfg_.padding_idx : -1);
  if (cfg_.scale) e = mul(e, std::sqrt(double(bands_.dims[band])));
  if (projections_[band]) e = linear(e, *projections_[band]);
  return e;
}

// ---------------------------------------------------------------------------------------------
// AdaptiveSoftmax

namespace {

void check_tied_input(const AdaptiveSoftmaxConfig& cfg, const AdaptiveInput* tied) {
  const char* layer = "AdaptiveSoftmax";
  if (!cfg.tie_weights && !cfg.tie_projections) return;
  if (!tied) fail(layer, "tie_weights / tie_projections need the AdaptiveInput to tie to");
  const AdaptiveInputConfig& in = tied->config();
  if (in.vocab != cfg.vocab) fail(layer, "vocabulary {} differs from the tied input's {}", cfg.vocab, in.vocab);
  if (in.factor != cfg.factor) fail(layer, "factor {} differs from the tied input's {}", cfg.factor, in.factor);
  if (with_vocab(layer, cfg.vocab, cfg.cutoffs) != tied->bands().bounds)
    fail(layer, "cutoffs differ from the tied input's");
  if (cfg.tie_projections && cfg.dim != in.dim)
    fail(layer, "tie_projections needs the input width {} to equal the tied input's width {}", cfg.dim, in.dim);
}

}  // namespace

AdaptiveSoftmax::AdaptiveSoftmax(const AdaptiveSoftmaxConfig& cfg, const AdaptiveInput* tied, Generator& gen)
    : Module("AdaptiveSoftmax"), cfg_(cfg) {
  const char* layer = "AdaptiveSoftmax";
  check_dropout_probability(layer, cfg.dropout);
  check_tied_input(cfg, tied);
  // Tied: the input's bands (their widths come from the input's n); untied: from this n.
  bands_ = cfg.tie_weights || cfg.tie_projections ? tied->bands()
                                                  : adaptive_bands(layer, cfg.vocab, cfg.dim, cfg.cutoffs, cfg.factor);
  const std::int64_t n = cfg.dim, c0 = bands_.bounds[0];
  const auto tails = static_cast<std::int64_t>(bands_.bounds.size()) - 1;
  const bool skip = cfg.skip_init;

  auto head = register_module("head", std::make_shared<ParameterGroup>("AdaptiveSoftmaxHead"));
  if (cfg.tie_weights) {
    word_weight_ = head->add("word_weight", tied->embedding(0));
    if (bands_.dims[0] != n)  // words live in dim_0-space: reach it with an extra projection
      head_projection_ = head->add("input_projection", xavier(skip, bands_.dims[0], n, gen));
    if (tails > 0) cluster_weight_ = head->add("cluster_weight", xavier(skip, tails, n, gen));
  } else if (skip) {
    word_weight_ = head->add("word_weight", empty({c0, n}));
    if (tails > 0) cluster_weight_ = head->add("cluster_weight", empty({tails, n}));
  } else {
    // One xavier draw over [c_0 + T, n], as fairseq's single head Linear.
    const Tensor w = xavier(false, c0 + tails, n, gen);
    word_weight_ = head->add("word_weight", contiguous(narrow(w, 0, 0, c0)));
    if (tails > 0) cluster_weight_ = head->add("cluster_weight", contiguous(narrow(w, 0, c0, tails)));
  }
  if (cfg.head_bias) head_bias_ = head->add("bias", zeros_param(skip, c0 + tails));

  auto list = register_module("tails", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < tails; ++i) {
    auto group = list->push_back(std::make_shared<ParameterGroup>("AdaptiveSoftmaxTail"));
    const std::size_t band = static_cast<std::size_t>(i) + 1;
    const std::int64_t dim = bands_.dims[band], words = bands_.rows[band];
    Tail t;
    if (cfg.tie_projections) {
      t.projection = group->add("projection", tied->projection(band));  // [n, dim], used as h @ P
      t.projection_transposed = true;
    } else {
      t.projection = group->add("projection", xavier(skip, dim, n, gen));
    }
    t.weight = group->add("weight", cfg.tie_weights ? tied->embedding(band) : xavier(skip, words, dim, gen));
    if (cfg.tail_bias) t.bias = group->add("bias", zeros_param(skip, words));
    tails_.push_back(t);
  }
}

Tensor AdaptiveSoftmax::head_logits(const Tensor& h) const {
  const Tensor bias = head_bias_ ? *head_bias_ : Tensor();
  if (!head_projection_) {
    const Tensor w = cluster_weight_ ? concat({*word_weight_, *cluster_weight_}, 0) : *word_weight_;
    return linear(h, w, bias);
  }
  // Words through the extra projection into dim_0-space, clusters straight from h.
  Tensor logits = linear(linear(h, *head_projection_), *word_weight_);
  if (cluster_weight_) logits = concat({logits, linear(h, *cluster_weight_)}, 1);
  return bias.defined() ? add(logits, bias) : logits;
}

Tensor AdaptiveSoftmax::tail_logits(std::size_t i, const Tensor& h, bool training) const {
  const Tail& t = tails_[i];
  Tensor p = t.projection_transposed ? matmul(h, *t.projection) : linear(h, *t.projection);
  p = dropout(p, cfg_.dropout, training, generator());
  return linear(p, *t.weight, t.bias ? *t.bias : Tensor());
}

Tensor AdaptiveSoftmax::loss(const Tensor& hidden, const Tensor& target, Reduction reduction,
                             std::int64_t ignore_index) const {
  const AdaptiveLossParts parts{"AdaptiveSoftmax",
                                cfg_.dim,
                                bands_.bounds,
                                cfg_.dropout,
                                is_training(),
                                generator(),
                                [this](const Tensor& h) { return head_logits(h); },
                                [this](std::size_t i, const Tensor& h) { return tail_logits(i, h, is_training()); }};
  return adaptive_loss(parts, hidden, target, reduction, ignore_index);
}

Tensor AdaptiveSoftmax::log_prob(const Tensor& hidden) const {
  return adaptive_log_prob(
      "AdaptiveSoftmax", hidden, cfg_.dim, bands_.bounds, [this](const Tensor& h) { return head_logits(h); },
      [this](std::size_t i, const Tensor& h) { return tail_logits(i, h, false); });
}

// ---------------------------------------------------------------------------------------------
// Transformer-XL projected form

namespace {

// Transformer-XL's initialisation (init = normal): tables and cluster weights N(0, 0.02),
// projections N(0, 0.01), biases 0.
constexpr double kTxlInitStd = 0.02;
constexpr double kTxlProjInitStd = 0.01;

void check_projected(const char* layer, const ProjectedAdaptiveConfig& cfg) {
  if (cfg.dim <= 0 || cfg.proj_dim <= 0)
    fail(layer, "widths must be positive, got n = {} and d_proj = {}", cfg.dim, cfg.proj_dim);
}

}  // namespace

ProjectedAdaptiveInput::ProjectedAdaptiveInput(const ProjectedAdaptiveConfig& cfg, Generator& gen)
    : Module("ProjectedAdaptiveInput"), cfg_(cfg) {
  const char* layer = "ProjectedAdaptiveInput";
  check_projected(layer, cfg);
  with_vocab(layer, cfg.vocab, cfg.cutoffs);  // validates; the single table ignores the bands
  if (cfg.padding_idx < -1 || cfg.padding_idx >= cfg.vocab)
    fail(layer, "padding_idx {} out of range for {} words (use -1 for none)", cfg.padding_idx, cfg.vocab);
  Tensor table = table_init(cfg.skip_init, cfg.vocab, cfg.dim, kTxlInitStd, gen);
  if (cfg.padding_idx >= 0 && !cfg.skip_init) {
    NoGradGuard no_grad;
    fill_(select(table, 0, cfg.padding_idx), 0.0);
  }
  weight_ = &register_parameter("weight", table);
  if (cfg.dim != cfg.proj_dim)
    projection_ = &register_parameter("projection", table_init(cfg.skip_init, cfg.proj_dim, cfg.dim, kTxlProjInitStd, gen));
}

Tensor ProjectedAdaptiveInput::forward(const Tensor& tokens) const {
  flat_tokens("ProjectedAdaptiveInput", tokens);
  Tensor e = embedding(*weight_, tokens, cfg_.padding_idx);
  if (projection_) e = linear(e, *projection_);
  return cfg_.scale ? mul(e, std::sqrt(double(cfg_.proj_dim))) : e;
}

ProjectedAdaptiveSoftmax::ProjectedAdaptiveSoftmax(const ProjectedAdaptiveConfig& cfg,
                                                   const ProjectedAdaptiveInput* tied, Generator& gen)
    : Module("ProjectedAdaptiveSoftmax"), cfg_(cfg) {
  const char* layer = "ProjectedAdaptiveSoftmax";
  check_projected(layer, cfg);
  check_dropout_probability(layer, cfg.dropout);
  bounds_ = with_vocab(layer, cfg.vocab, cfg.cutoffs);
  const bool projected = cfg.dim != cfg.proj_dim;
  const bool shares = projected && cfg.projections != ProjectedTying::None;
  if ((cfg.tie_weights || shares) && !tied)
    fail(layer, "tie_weights / shared projections need the ProjectedAdaptiveInput to tie to");
  if (tied) {
    const ProjectedAdaptiveConfig& in = tied->config();
    if (in.vocab != cfg.vocab || in.dim != cfg.dim || in.proj_dim != cfg.proj_dim ||
        with_vocab(layer, in.vocab, in.cutoffs) != bounds_)
      fail(layer, "V, n, d_proj and cutoffs must equal the tied input's ({}, {}, {})", in.vocab, in.dim, in.proj_dim);
  }
  const bool skip = cfg.skip_init;
  const auto tails = static_cast<std::int64_t>(bounds_.size()) - 1;
  weight_ = &register_parameter("weight", cfg.tie_weights ? tied->weight()
                                                          : table_init(skip, cfg.vocab, cfg.dim, kTxlInitStd, gen));
  bias_ = &register_parameter("bias", zeros_param(skip, cfg.vocab));
  if (tails > 0) {
    cluster_weight_ = &register_parameter("cluster_weight", table_init(skip, tails, cfg.dim, kTxlInitStd, gen));
    cluster_bias_ = &register_parameter("cluster_bias", zeros_param(skip, tails));
  }
  projections_.assign(bounds_.size(), nullptr);
  if (!projected) return;
  auto group = register_module("projections", std::make_shared<ParameterGroup>("ProjectedAdaptiveProjections"));
  for (std::size_t c = 0; c < bounds_.size(); ++c) {
    const bool shared = (cfg.projections == ProjectedTying::HeadShared && c == 0) ||
                        (cfg.projections == ProjectedTying::TailsShared && c > 0);
    projections_[c] = group->add(std::to_string(c), shared ? tied->projection()
                                                           : table_init(skip, cfg.proj_dim, cfg.dim, kTxlProjInitStd, gen));
  }
}

const Tensor& ProjectedAdaptiveSoftmax::projection(std::size_t cluster) const {
  return projections_.at(cluster) ? *projections_[cluster] : none_;
}

Tensor ProjectedAdaptiveSoftmax::cluster_logits(std::size_t cluster, const Tensor& h) const {
  // Into word space n: h P_c (P_c [d_proj, n]), then the cluster's rows of the table.
  const Tensor x = projections_[cluster] ? matmul(h, *projections_[cluster]) : h;
  if (cluster == 0) {
    const std::int64_t c0 = bounds_[0];
    Tensor w = narrow(*weight_, 0, 0, c0), b = narrow(*bias_, 0, 0, c0);
    if (cluster_weight_) {
      w = concat({w, *cluster_weight_}, 0);
      b = concat({b, *cluster_bias_}, 0);
    }
    return linear(x, w, b);
  }
  const std::int64_t first = bounds_[cluster - 1], words = bounds_[cluster] - first;
  return linear(x, narrow(*weight_, 0, first, words), narrow(*bias_, 0, first, words));
}

Tensor ProjectedAdaptiveSoftmax::loss(const Tensor& hidden, const Tensor& target, Reduction reduction,
                                      std::int64_t ignore_index) const {
  const AdaptiveLossParts parts{"ProjectedAdaptiveSoftmax",
                                cfg_.proj_dim,
                                bounds_,
                                cfg_.dropout,
                                is_training(),
                                generator(),
                                [this](const Tensor& h) { return cluster_logits(0, h); },
                                [this](std::size_t i, const Tensor& h) { return cluster_logits(i + 1, h); }};
  return adaptive_loss(parts, hidden, target, reduction, ignore_index);
}

Tensor ProjectedAdaptiveSoftmax::log_prob(const Tensor& hidden) const {
  return adaptive_log_prob(
      "ProjectedAdaptiveSoftmax", hidden, cfg_.proj_dim, bounds_,
      [this](const Tensor& h) { return cluster_logits(0, h); },
      [this](std::size_t i, const Tensor& h) { return cluster_logits(i + 1, h); });
}

}  // namespace define::nn
