#include "models/token_representation.h"

#include <algorithm>
#include <vector>
#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"
#include "kernels/host_mirror.h"
#include "nn/delight_block.h"

namespace define::models {
namespace {

constexpr const char* kInput = "TokenInput";

struct KindName {
  TokenInputKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{TokenInputKind::Embedding, "embedding"}, {TokenInputKind::Projective, "projective"},
                               {TokenInputKind::Define, "define"},       {TokenInputKind::DefineIclr, "define-iclr"},
                               {TokenInputKind::DExTra, "dextra"},       {TokenInputKind::Adaptive, "adaptive"},
                               {TokenInputKind::Projected, "projected"}};

nn::EmbeddingOptions table_options(const TokenInputConfig& cfg) {
  nn::EmbeddingOptions opt;
  if (cfg.init_range) opt.init_range = *cfg.init_range;
  return opt;
}

nn::AdaptiveInputConfig adaptive_config(const TokenInputConfig& cfg) {
  nn::AdaptiveInputConfig a;
  a.vocab = cfg.vocab;
  a.dim = cfg.map_dim;
  a.cutoffs = cfg.cutoffs;
  a.factor = cfg.factor;
  a.project_band0 = false;  // DeFINE's LSTM form (spec §5.3): band 0 is already n wide
  a.scale = cfg.scale;      // each band times sqrt(dim_i), inside the adaptive input (the only place)
  return a;
}

nn::ProjectedAdaptiveConfig projected_config(const TokenInputConfig& cfg) {
  nn::ProjectedAdaptiveConfig p;
  p.vocab = cfg.vocab;
  p.dim = cfg.map_dim;
  p.proj_dim = cfg.proj_dim;
  p.cutoffs = cfg.cutoffs;
  p.scale = cfg.scale;
  return p;
}

// tie_projections of a projected table: which softmax projections are the input's (nn/adaptive.h).
nn::ProjectedTying read_projection_tying(const Config& c) {
  const std::string t = c.get_string("tie_projections", "head");
  if (t == "head") return nn::ProjectedTying::HeadShared;
  if (t == "tails") return nn::ProjectedTying::TailsShared;
  if (t == "none") return nn::ProjectedTying::None;
  fail(kInput, "{} must be 'head' (DeFINE Table 2's counts), 'tails' (Transformer-XL's tie_projs) or 'none', got '{}'",
       c.path("tie_projections"), t);
}

}  // namespace

TokenInputKind parse_token_input_kind(const std::string& name) {
  for (const KindName& k : kKinds)
    if (name == k.name) return k.kind;
  fail(kInput, "unknown input type '{}' (expected embedding, projective, define, define-iclr, dextra, adaptive or projected)",
       name);
}

const char* to_string(TokenInputKind kind) {
  for (const KindName& k : kKinds)
    if (kind == k.kind) return k.name;
  return "?";
}

TokenInputConfig read_token_input_config(const Config& c, std::int64_t vocab, bool embedding_scaled) {
  TokenInputConfig cfg;
  cfg.vocab = vocab;
  cfg.kind = parse_token_input_kind(c.get_string("type", "embedding"));
  cfg.map_dim = c.get_int("dim");
  const bool released = cfg.kind == TokenInputKind::DefineIclr || cfg.kind == TokenInputKind::DExTra;
  const bool has_unit = released || cfg.kind == TokenInputKind::Define || cfg.kind == TokenInputKind::Projective;
  cfg.out_dim = has_unit ? c.get_int("out_dim") : cfg.map_dim;
  // Transformer-XL scales its (projected) embedding by sqrt(d_model) unconditionally.
  const bool projected = cfg.kind == TokenInputKind::Projected;
  if (projected) cfg.out_dim = c.get_int("out_dim", cfg.map_dim);
  // Adaptive input scales each band by sqrt(its width) unless told not to (fairseq's default).
  cfg.scale = c.get_bool("scale", released || projected || cfg.kind == TokenInputKind::Adaptive ||
                                      (embedding_scaled && cfg.kind == TokenInputKind::Embedding));
  if (c.has("init_range")) cfg.init_range = c.get_double("init_range");
  if (has_unit) cfg.distinct_tokens = c.get_bool("distinct_tokens", true);
  const auto unit_options = [&] {
    cfg.norm = nn::parse_grouped_linear_norm(c.get_string("norm", "chunk"));
    cfg.activation = nn::parse_activation(c.get_string("activation", "swish"));
    cfg.unit_dropout = c.get_double("dropout", 0.0);
  };
  switch (cfg.kind) {
    case TokenInputKind::Embedding:
    case TokenInputKind::Projective: break;
    case TokenInputKind::Define:
      unit_options();
      cfg.define.k = c.get_int("k");
      cfg.define.N = c.get_int("depth");
      cfg.define.g_max = c.get_int("g_max");
      cfg.define.variant = nn::parse_define_variant(c.get_string("variant", "define"));
      cfg.define.init = nn::parse_grouped_linear_init(c.get_string("init", "released"));
      cfg.define.reduce_skip = c.get_bool("reduce_skip", false);
      if (const std::string map = c.get_string("map", "table"); map == "adaptive") {
        cfg.adaptive_map = true;
        cfg.scale = c.get_bool("scale", true);  // per band, as the adaptive input
        cfg.cutoffs = c.get_int_list("cutoffs");
        cfg.factor = c.get_double("factor", 4.0);
      } else if (map == "projected") {
        cfg.projected_map = true;
        cfg.proj_dim = c.get_int("proj_dim", cfg.out_dim);
        cfg.scale = c.get_bool("scale", true);  // as the projected input: times sqrt(proj_dim)
        cfg.cutoffs = c.get_int_list("cutoffs", {});
        cfg.projection_tying = read_projection_tying(c);
      } else if (map != "table") {
        fail(kInput, "model.input.map must be 'table', 'adaptive' or 'projected', got '{}'", map);
      }
      break;
    case TokenInputKind::DefineIclr: {
      unit_options();
      // The released DeFINE mode is configured like the paper (peak width k), which DExTraEmb
      // expresses as w = k / n.
      const std::int64_t k = c.get_int("k");
      cfg.width_mult = static_cast<double>(k) / static_cast<double>(cfg.map_dim);
      cfg.depth = c.get_int("depth");
      cfg.max_groups = c.get_int("max_groups");
      break;
    }
    case TokenInputKind::DExTra:
      unit_options();
      cfg.width_mult = c.get_double("width_mult", 2.0);
      cfg.depth = c.get_int("depth", 4);
      cfg.group_rule = nn::parse_dextra_group_rule(c.get_string("group_rule", "released"));
      // The group rule's G (spec §4.1) only when not given: the released one is undefined for d_m < 32.
      cfg.max_groups = c.has("max_groups") ? c.get_int("max_groups")
                                           : c.get_int("max_groups", nn::dextra_max_groups(cfg.out_dim, cfg.group_rule));
      break;
    case TokenInputKind::Adaptive:
      cfg.cutoffs = c.get_int_list("cutoffs");
      cfg.factor = c.get_double("factor", 4.0);
      break;
    case TokenInputKind::Projected:
      cfg.proj_dim = cfg.out_dim;
      cfg.cutoffs = c.get_int_list("cutoffs", {});
      cfg.projection_tying = read_projection_tying(c);
      break;
  }
  return cfg;
}

TokenInput::TokenInput(const TokenInputConfig& cfg, Generator& gen) : Module(kInput), cfg_(cfg) {
  if (cfg.vocab < 1) fail(kInput, "vocabulary size must be positive, got {}", cfg.vocab);
  if (cfg.map_dim < 1) fail(kInput, "dim must be positive, got {}", cfg.map_dim);
  switch (cfg.kind) {
    case TokenInputKind::Embedding:
      map_ = register_module("map", std::make_shared<nn::Embedding>(cfg.vocab, cfg.map_dim, table_options(cfg), gen));
      break;
    case TokenInputKind::Projective:
      map_ = register_module("map", std::make_shared<nn::Embedding>(cfg.vocab, cfg.map_dim, table_options(cfg), gen));
      projection_ = register_module(
          "projection", std::make_shared<nn::Linear>(cfg.map_dim, cfg.out_dim, nn::LinearOptions{.bias = false}, gen));
      break;
    case TokenInputKind::Define: {
      if (cfg.adaptive_map)
        adaptive_ = register_module("adaptive", std::make_shared<nn::AdaptiveInput>(adaptive_config(cfg), gen));
      else if (cfg.projected_map)
        projected_ = register_module("projected", std::make_shared<nn::ProjectedAdaptiveInput>(projected_config(cfg), gen));
      else
        map_ = register_module("map", std::make_shared<nn::Embedding>(cfg.vocab, cfg.map_dim, table_options(cfg), gen));
      nn::DefineConfig d = cfg.define;
      d.n = cfg.projected_map ? cfg.proj_dim : cfg.map_dim;
      d.m = cfg.out_dim;
      d.norm = cfg.norm;
      d.activation = cfg.activation;
      d.dropout = cfg.unit_dropout;
      define_ = register_module("unit", std::make_shared<nn::DefineUnit>(d, gen));
      if (define_->out_features() != cfg.out_dim)
        fail(kInput, "the DeFINE variant '{}' outputs {} features, not out_dim = {}", nn::to_string(d.variant),
             define_->out_features(), cfg.out_dim);
      break;
    }
    case TokenInputKind::DefineIclr:
    case TokenInputKind::DExTra: {
      nn::DExTraEmbConfig e;
      e.vocab = cfg.vocab;
      e.map_dim = cfg.map_dim;
      e.scale_embedding = cfg.scale;
      e.out_dim = cfg.out_dim;
      e.width_mult = cfg.width_mult;
      e.depth = cfg.depth;
      e.max_groups = cfg.max_groups;
      e.group_rule = cfg.group_rule;
      e.mode = cfg.kind == TokenInputKind::DefineIclr ? nn::DExTraMode::DefineIclr : nn::DExTraMode::DExTra;
      e.norm = cfg.norm;
      e.activation = cfg.activation;
      e.dropout = cfg.unit_dropout;
      auto shared_map =
          register_module("map", std::make_shared<nn::Embedding>(cfg.vocab, cfg.map_dim, table_options(cfg), gen));
      map_ = shared_map;
      dextra_ = register_module("dextra_emb", std::make_shared<nn::DExTraEmb>(e, shared_map, gen));
      break;
    }
    case TokenInputKind::Adaptive:
      adaptive_ = register_module("adaptive", std::make_shared<nn::AdaptiveInput>(adaptive_config(cfg), gen));
      break;
    case TokenInputKind::Projected:
      projected_ = register_module("projected", std::make_shared<nn::ProjectedAdaptiveInput>(projected_config(cfg), gen));
      break;
  }
}

Tensor TokenInput::forward(const Tensor& tokens) const {
  if (cache_.defined()) {
    if (is_training())
      fail(kInput, "a cached table (use_cache) serves evaluation only; call eval() or use_cache({{}}) before training");
    check_cache_current();
    return embedding(cache_, tokens);
  }
  if (has_unit() && cfg_.distinct_tokens && tokens.numel() > 0 && !(is_training() && cfg_.unit_dropout > 0)) {
    const DistinctIds d = distinct_ids(tokens);
    // As a [U, 1] batch: DExTra's embedding reads time-major [T, B] ids.
    const std::int64_t U = d.ids.size(0);
    const Tensor rows = reshape(forward_per_position(reshape(d.ids, {U, 1})), {U, cfg_.out_dim});
    return embedding(rows, d.positions);
  }
  return forward_per_position(tokens);
}

Tensor TokenInput::forward_per_position(const Tensor& tokens) const {
  switch (cfg_.kind) {
    case TokenInputKind::Embedding: {
      Tensor e = map_->forward(tokens);
      return cfg_.scale ? mul(e, std::sqrt(static_cast<double>(cfg_.map_dim))) : e;
    }
    case TokenInputKind::Projective: {
      Tensor e = map_->forward(tokens);
      if (cfg_.scale) e = mul(e, std::sqrt(static_cast<double>(cfg_.map_dim)));
      return projection_->forward(e);
    }
    case TokenInputKind::Define: return define_->forward(map_rows(tokens));
    case TokenInputKind::DefineIclr:
    case TokenInputKind::DExTra: return dextra_->forward(tokens);
    case TokenInputKind::Adaptive: return adaptive_->forward(tokens);
    case TokenInputKind::Projected: return projected_->forward(tokens);
  }
  fail(kInput, "unreachable input kind");
}

DistinctIds distinct_ids(const Tensor& tokens) {
  if (tokens.dtype() != DType::Int64 && tokens.dtype() != DType::Int32)
    fail(kInput, "token ids must be int32 or int64, got {}", dtype_name(tokens.dtype()));
  // On the host: a batch's ids are a few thousand at most, and sorting them costs nothing next to
  // the unit. Device ids the training task uploaded come with their host copy
  // (kernels::HostMirrorScope); others are copied back, which waits for the device.
  const Tensor mirror = kernels::host_mirror(tokens);
  const Tensor host = to_dtype(contiguous(mirror.defined() ? mirror : to_device(tokens, Device::cpu())), DType::Int64);
  const std::int64_t* p = host.data<std::int64_t>();
  std::vector<std::int64_t> ids(p, p + host.numel());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::int64_t> positions(static_cast<std::size_t>(host.numel()));
  for (std::size_t i = 0; i < positions.size(); ++i)
    positions[i] = std::lower_bound(ids.begin(), ids.end(), p[i]) - ids.begin();
  const auto n = static_cast<std::int64_t>(ids.size());
  return {to_device(from_vector(ids, {n}), tokens.device()),
          to_device(from_vector(positions, tokens.shape()), tokens.device())};
}

const Tensor& TokenInput::table() const {
  if (projected_) return projected_->weight();
  if (!map_) fail(kInput, "input type '{}' has no single table to tie", to_string(cfg_.kind));
  return map_->weight();
}

Tensor TokenInput::map_rows(const Tensor& ids) const {
  // The adaptive and projected maps scale inside (per band); only a plain table is scaled here.
  if (projected_) return projected_->forward(ids);
  if (adaptive_) return adaptive_->forward(ids);
  const Tensor e = map_->forward(ids);
  return cfg_.scale ? mul(e, std::sqrt(static_cast<double>(cfg_.map_dim))) : e;
}

Device TokenInput::device() const { return adaptive_ ? adaptive_->parameters().front().device() : table().device(); }

bool TokenInput::has_unit() const { return projection_ || define_ || dextra_; }

Tensor TokenInput::compute_cache() const {
  if (!has_unit())
    fail(kInput, "input type '{}' has no unit to cache (its table already is the representation)",
         to_string(cfg_.kind));
  if (is_training()) fail(kInput, "compute_cache needs eval mode (dropout in the unit would make rows random)");
  if (cache_.defined()) fail(kInput, "compute_cache: a cached table is in use; call use_cache({{}}) first");
  NoGradGuard no_grad;
  // Chunks bound the unit's intermediate activations (widths up to k per token) for large V.
  // Ids go in as [chunk, 1] (time-major, one stream): the released forms expect [T, B].
  constexpr std::int64_t kChunk = 4096;
  std::vector<Tensor> parts;
  const Device device = this->device();
  for (std::int64_t first = 0; first < cfg_.vocab; first += kChunk) {
    const std::int64_t n = std::min(kChunk, cfg_.vocab - first);
    std::vector<std::int64_t> id_values(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) id_values[static_cast<std::size_t>(i)] = first + i;
    const Tensor ids = from_vector(id_values, {n, 1}, device);
    parts.push_back(reshape(forward(ids), {n, cfg_.out_dim}));
  }
  return parts.size() == 1 ? contiguous(parts[0]) : concat(parts, 0);
}

void TokenInput::use_cache(Tensor table) {
  if (table.defined()) {
    if (!has_unit())
      fail(kInput, "input type '{}' has no unit; a cached table would only duplicate its embedding", to_string(cfg_.kind));
    const Shape want{cfg_.vocab, cfg_.out_dim};
    if (table.shape() != want)
      fail(kInput, "cached table has shape {}, this input needs {} (vocabulary x out_dim)", shape_str(table.shape()),
           shape_str(want));
    if (!is_floating(table.dtype())) fail(kInput, "cached table must be floating point, got {}", dtype_name(table.dtype()));
    // A file is read to the CPU; the lookups run where the model is.
    if (table.device() != device()) table = copy_to_device(table, device());
  }
  cache_ = std::move(table);
  cached_from_.clear();
  if (cache_.defined())
    for (const auto& [name, p] : named_parameters()) cached_from_.push_back({name, p.storage(), p.version()});
}

void TokenInput::check_cache_current() const {
  // Any in-place update (optimizer step, load_state_dict, import, copy_) bumps a storage's
  // version; moving the module replaces the storage. Either way the cached rows no longer are
  // what the unit computes.
  const auto params = named_parameters();
  std::size_t i = 0;
  for (const auto& [name, p] : params) {
    const bool same = i < cached_from_.size() && cached_from_[i].name == name &&
                      cached_from_[i].storage == p.storage() && cached_from_[i].version == p.version();
    if (!same)
      fail(kInput, "the cached table is stale: parameter '{}' changed after use_cache(); compute the cache again",
           name);
    ++i;
  }
}

PartRules TokenInput::part_rules(const std::string& prefix) const {
  // Everything is input-output except the token-representation unit (and a projective
  // embedding's projection, which the papers count with the embedding).
  PartRules rules = {{prefix, kPartInputOutput}};
  if (define_) rules.emplace_back(prefix + "unit.", kPartDefine);
  if (dextra_) rules.emplace_back(prefix + "dextra_emb.", kPartDefine);
  return rules;
}

TiedOutput::TiedOutput(const TokenInput& input, const TiedOutputConfig& cfg, Generator& gen) : Module("TiedOutput") {
  const TokenInputConfig& in = input.config();
  if (cfg.hidden_dim < 1) fail("TiedOutput", "hidden_dim must be positive, got {}", cfg.hidden_dim);
  if (const nn::ProjectedAdaptiveInput* projected = input.projected()) {
    nn::ProjectedAdaptiveConfig p = projected->config();
    if (cfg.hidden_dim != p.proj_dim)
      project_out_ = register_module(
          "project_out", std::make_shared<nn::Linear>(cfg.hidden_dim, p.proj_dim, nn::LinearOptions{.bias = false}, gen));
    p.dropout = cfg.adaptive_dropout;
    p.tie_weights = true;
    p.projections = in.projection_tying;
    projected_softmax_ = register_module("softmax", std::make_shared<nn::ProjectedAdaptiveSoftmax>(p, projected, gen));
    return;
  }
  if (cfg.hidden_dim != in.map_dim)
    project_out_ = register_module(
        "project_out", std::make_shared<nn::Linear>(cfg.hidden_dim, in.map_dim, nn::LinearOptions{.bias = false}, gen));
  if (input.adaptive()) {
    nn::AdaptiveSoftmaxConfig s;
    s.vocab = in.vocab;
    s.dim = in.map_dim;
    s.cutoffs = in.cutoffs;
    s.factor = in.factor;
    s.dropout = cfg.adaptive_dropout;
    s.tie_weights = true;
    s.tie_projections = true;
    softmax_ = register_module("softmax", std::make_shared<nn::AdaptiveSoftmax>(s, input.adaptive(), gen));
    return;
  }
  table_ = input.table();
  if (cfg.bias) bias_ = &register_parameter("bias", zeros({in.vocab}, {.dtype = table_.dtype()}));
}

Tensor TiedOutput::to_map_space(const Tensor& hidden) const {
  return project_out_ ? project_out_->forward(hidden) : hidden;
}

Tensor TiedOutput::log_prob(const Tensor& hidden) const {
  const Tensor h = to_map_space(hidden);
  if (projected_softmax_) return projected_softmax_->log_prob(h);
  if (softmax_) return softmax_->log_prob(h);
  return log_softmax(linear(h, table_, bias_ ? *bias_ : Tensor()), -1);
}

Tensor TiedOutput::logits(const Tensor& hidden) const {
  if (projected_softmax_ || softmax_)
    fail("TiedOutput", "an adaptive softmax has no full logits; use log_prob() or loss()");
  return linear(to_map_space(hidden), table_, bias_ ? *bias_ : Tensor());
}

Tensor TiedOutput::smoothed_loss(const Tensor& hidden, const Tensor& target, std::int64_t ignore_index,
                                 double label_smoothing, Reduction reduction, Tensor* unsmoothed) const {
  if (projected_softmax_ || softmax_)
    fail("TiedOutput", "an adaptive softmax has no full logits to smooth a loss over; use loss()");
  return linear_cross_entropy(to_map_space(hidden), table_, bias_ ? *bias_ : Tensor(), target, ignore_index,
                              label_smoothing, reduction, unsmoothed);
}

Tensor TiedOutput::loss(const Tensor& hidden, const Tensor& target, Reduction reduction) const {
  if (!projected_softmax_ && !softmax_) return smoothed_loss(hidden, target, -100, 0.0, reduction);
  const Tensor h = to_map_space(hidden);
  if (projected_softmax_) return projected_softmax_->loss(h, target, reduction);
  return softmax_->loss(h, target, reduction);
}

}  // namespace define::models
