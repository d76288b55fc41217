#include "models/transformer_xl.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/recompute.h"
#include "autograd/rel_attention.h"
#include "core/error.h"
#include "kernels/copy.h"
#include "nn/container.h"
#include "nn/init.h"

namespace define::models {
namespace {

constexpr const char* kModel = "TransformerXL";
constexpr double kBiasInitStd = 0.02;  // the reference code's init_std for r_w_bias / r_r_bias
// The reference code's init_std: its weights_init draws every Linear weight from N(0, 0.02) (biases
// 0) and every LayerNorm gain from N(1, 0.02) (shifts 0).
constexpr double kReferenceInitStd = 0.02;

void check_probability(const char* what, double p) {
  if (!(p >= 0.0 && p < 1.0)) fail(kModel, "{} must be in [0, 1), got {}", what, p);
}

}  // namespace

// One decoder layer: relative multi-head attention over [memory; x], then the feed-forward net.
class RelLayer : public nn::Module {
 public:
  RelLayer(const TransformerXLConfig& c, Generator& gen) : Module("RelLayer"), cfg_(c) {
    const std::int64_t hd = c.n_head * c.d_head;
    const nn::LinearOptions no_bias{.bias = false};
    auto attn = register_module("attn", std::make_shared<nn::Module>("RelAttention"));
    qkv_ = attn->register_module("qkv", std::make_shared<nn::Linear>(c.d_model, 3 * hd, no_bias, gen));
    r_net_ = attn->register_module("r_net", std::make_shared<nn::Linear>(c.d_model, hd, no_bias, gen));
    o_net_ = attn->register_module("o_net", std::make_shared<nn::Linear>(hd, c.d_model, no_bias, gen));
    attn_norm_ = attn->register_module("norm", std::make_shared<nn::LayerNorm>(c.d_model));
    if (c.untie_r) {
      r_w_bias_ = &attn->register_parameter("r_w_bias", nn::init::normal({c.n_head, c.d_head}, 0.0, kBiasInitStd, gen));
      r_r_bias_ = &attn->register_parameter("r_r_bias", nn::init::normal({c.n_head, c.d_head}, 0.0, kBiasInitStd, gen));
    }
    auto ff = register_module("ff", std::make_shared<nn::Module>("PositionwiseFF"));
    fc1_ = ff->register_module("fc1", std::make_shared<nn::Linear>(c.d_model, c.d_inner, nn::LinearOptions{}, gen));
    fc2_ = ff->register_module("fc2", std::make_shared<nn::Linear>(c.d_inner, c.d_model, nn::LinearOptions{}, gen));
    ff_norm_ = ff->register_module("norm", std::make_shared<nn::LayerNorm>(c.d_model));
    if (c.reference_init) reference_init(gen);
  }

  // x [T, B, D], memory [M, B, D] or undefined, r [Tk, D] -> [T, B, D]. u, w: the shared biases
  // (ignored with untie_r). window: same_length's key window, 0 for none.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& r, const Tensor& u, const Tensor& w,
                 std::int64_t window) const {
    const std::int64_t T = x.size(0), B = x.size(1), H = cfg_.n_head, dh = cfg_.d_head;
    const Tensor h = memory.defined() && memory.size(0) > 0 ? concat({memory, x}, 0) : x;
    const std::int64_t Tk = h.size(0);
    const Tensor heads = qkv_->forward(cfg_.pre_lnorm ? attn_norm_->forward(h) : h);  // [Tk, B, 3 H dh]
    // [Tk, B, 3, H, dh] -> three [B, H, Tk, dh] views; q keeps the segment's last T rows. One
    // split, not three selects: its backward writes the three gradients into one buffer in one
    // pass, where each select's would zero a buffer of all three and the engine would sum them.
    const std::vector<Tensor> qkv = split(reshape(heads, {Tk, B, 3, H, dh}), {1, 1, 1}, 2);
    auto head = [&](std::size_t i) { return permute(squeeze(qkv[i], 2), {1, 2, 0, 3}); };
    const Tensor q = narrow(head(0), 2, Tk - T, T), k = head(1), v = head(2);
    const Tensor rk = permute(reshape(r_net_->forward(r), {Tk, H, dh}), {1, 0, 2});  // [H, Tk, dh]
    const RelAttentionOptions opt{.window = window,
                                  .scale = 1.0 / std::sqrt(static_cast<double>(dh)),
                                  .dropout = cfg_.dropatt,
                                  .training = is_training(),
                                  .generator = &generator()};
    const Tensor a = relative_attention(q, k, v, rk, r_w_bias_ ? *r_w_bias_ : u, r_r_bias_ ? *r_r_bias_ : w, opt);
    // [B, H, T, dh] -> [T, B, H dh]
    const Tensor merged = reshape(contiguous(permute(a, {2, 0, 1, 3})), {T, B, H * dh});
    const Tensor attn_out = dropout(o_net_->forward(merged), cfg_.dropout, is_training(), generator());
    const Tensor y = cfg_.pre_lnorm ? add(x, attn_out) : attn_norm_->forward(add(x, attn_out));
    return feed_forward(y);
  }

 private:
  Tensor feed_forward(const Tensor& x) const {
    const Tensor in = cfg_.pre_lnorm ? ff_norm_->forward(x) : x;
    Tensor hdn = dropout(relu(fc1_->forward(in)), cfg_.dropout, is_training(), generator());
    hdn = dropout(fc2_->forward(hdn), cfg_.dropout, is_training(), generator());
    return cfg_.pre_lnorm ? add(x, hdn) : ff_norm_->forward(add(x, hdn));
  }

  TransformerXLConfig cfg_;
  // model.init = reference: the reference code's weights_init for this layer's tensors (drawn over
  // define's own values).
  void reference_init(Generator& gen) {
    NoGradGuard no_grad;
    for (const nn::Linear* l : {qkv_.get(), r_net_.get(), o_net_.get(), fc1_.get(), fc2_.get()}) {
      kernels::copy_into(l->weight(), nn::init::normal(l->weight().shape(), 0.0, kReferenceInitStd, gen));
      if (l->bias().defined()) fill_(l->bias(), 0.0);
    }
    for (const nn::LayerNorm* n : {attn_norm_.get(), ff_norm_.get()}) {
      kernels::copy_into(n->weight(), nn::init::normal(n->weight().shape(), 1.0, kReferenceInitStd, gen));
      fill_(n->bias(), 0.0);
    }
  }

  std::shared_ptr<nn::Linear> qkv_, r_net_, o_net_, fc1_, fc2_;
  std::shared_ptr<nn::LayerNorm> attn_norm_, ff_norm_;
  Tensor* r_w_bias_ = nullptr;
  Tensor* r_r_bias_ = nullptr;
};

TransformerXLConfig read_transformer_xl_config(const Config& model, std::int64_t vocab) {
  TransformerXLConfig cfg;
  cfg.input = read_token_input_config(model.section("input"), vocab, /*embedding_scaled=*/true);
  cfg.d_model = model.get_int("d_model", cfg.d_model);
  cfg.n_head = model.get_int("n_head", cfg.n_head);
  cfg.d_head = model.get_int("d_head", cfg.d_head);
  cfg.d_inner = model.get_int("d_inner", cfg.d_inner);
  cfg.n_layer = model.get_int("n_layer", cfg.n_layer);
  cfg.dropout = model.get_double("dropout", cfg.dropout);
  cfg.dropatt = model.get_double("dropatt", cfg.dropatt);
  cfg.pre_lnorm = model.get_bool("pre_lnorm", cfg.pre_lnorm);
  cfg.untie_r = model.get_bool("untie_r", cfg.untie_r);
  cfg.mem_len = model.get_int("mem_len", cfg.mem_len);
  cfg.clamp_len = model.get_int("clamp_len", cfg.clamp_len);
  cfg.same_length = model.get_bool("same_length", cfg.same_length);
  cfg.eval_mem_len = model.get_int("eval_mem_len", 0);
  cfg.eval_clamp_len = model.get_int("eval_clamp_len", 0);
  cfg.eval_same_length = model.get_bool("eval_same_length", cfg.same_length);
  cfg.adaptive_dropout = model.get_double("adaptive_dropout", 0.0);
  cfg.recompute = model.get_bool("recompute", false);
  const std::string init = model.get_string("init", "xavier");
  if (init != "xavier" && init != "reference")
    fail(kModel, "{} must be 'xavier' or 'reference', got '{}'", model.path("init"), init);
  cfg.reference_init = init == "reference";
  return cfg;
}

Tensor relative_positions(const std::vector<double>& distances, std::int64_t dim, TensorOptions opt) {
  if (dim < 2 || dim % 2 != 0) fail(kModel, "the position encoding needs an even d_model >= 2, got {}", dim);
  const std::int64_t half = dim / 2, n = static_cast<std::int64_t>(distances.size());
  std::vector<double> values(static_cast<std::size_t>(n * dim));
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = distances[static_cast<std::size_t>(p)] *
                           std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
      values[static_cast<std::size_t>(p * dim + i)] = std::sin(angle);
      values[static_cast<std::size_t>(p * dim + half + i)] = std::cos(angle);
    }
  return to_dtype(from_vector(values, {n, dim}, opt.device), opt.dtype);
}

TransformerXL::TransformerXL(const TransformerXLConfig& cfg, Generator& gen) : LanguageModel(kModel), cfg_(cfg) {
  if (cfg.n_layer < 1) fail(kModel, "n_layer must be at least 1, got {}", cfg.n_layer);
  if (cfg.d_model < 2 || cfg.d_model % 2 != 0) fail(kModel, "d_model must be even and >= 2, got {}", cfg.d_model);
  if (cfg.n_head < 1 || cfg.d_head < 1 || cfg.d_inner < 1)
    fail(kModel, "n_head, d_head and d_inner must be positive, got {}, {}, {}", cfg.n_head, cfg.d_head, cfg.d_inner);
  if (cfg.input.out_dim != cfg.d_model)
    fail(kModel, "the token representation outputs {} features but d_model = {} (set model.input.out_dim)",
         cfg.input.out_dim, cfg.d_model);
  if (cfg.mem_len < 0 || cfg.eval_mem_len < 0 || cfg.clamp_len < 0 || cfg.eval_clamp_len < 0)
    fail(kModel, "mem_len, eval_mem_len, clamp_len and eval_clamp_len must be >= 0");
  if ((cfg.same_length || cfg.eval_same_length) && cfg.mem_len == 0)
    fail(kModel, "same_length needs mem_len > 0 (it limits every query to mem_len keys)");
  check_probability("dropout", cfg.dropout);
  check_probability("dropatt", cfg.dropatt);
  check_probability("adaptive_dropout", cfg.adaptive_dropout);

  input_ = register_module("input", std::make_shared<TokenInput>(cfg.input, gen));
  auto list = register_module("layers", std::make_shared<nn::ModuleList>());
  for (std::int64_t l = 0; l < cfg.n_layer; ++l) layers_.push_back(list->push_back(std::make_shared<RelLayer>(cfg, gen)));
  if (!cfg.untie_r) {
    r_w_bias_ = &register_parameter("r_w_bias", nn::init::normal({cfg.n_head, cfg.d_head}, 0.0, kBiasInitStd, gen));
    r_r_bias_ = &register_parameter("r_r_bias", nn::init::normal({cfg.n_head, cfg.d_head}, 0.0, kBiasInitStd, gen));
  }
  TiedOutputConfig ocfg;
  ocfg.hidden_dim = cfg.d_model;
  ocfg.adaptive_dropout = cfg.adaptive_dropout;
  output_ = register_module("output", std::make_shared<TiedOutput>(*input_, ocfg, gen));
}

void TransformerXL::set_eval_memory(std::int64_t mem_len) {
  if (mem_len < 0) fail(kModel, "the evaluation memory length must be >= 0, got {}", mem_len);
  cfg_.eval_mem_len = mem_len;
}

std::pair<Tensor, LmState> TransformerXL::features(const Tensor& tokens, const LmState& state) {
  if (tokens.dim() != 2) fail(kModel, "tokens must be [T, B], got {} dims", tokens.dim());
  const bool training = is_training();
  const std::int64_t mem_len = training || cfg_.eval_mem_len == 0 ? cfg_.mem_len : cfg_.eval_mem_len;
  const std::int64_t clamp_len = training || cfg_.eval_clamp_len == 0 ? cfg_.clamp_len : cfg_.eval_clamp_len;
  const bool same_length = training ? cfg_.same_length : cfg_.eval_same_length;
  const std::int64_t T = tokens.size(0), B = tokens.size(1);

  std::vector<Tensor> memory(static_cast<std::size_t>(cfg_.n_layer));
  if (!state.empty()) {
    if (state.size() != memory.size())
      fail(kModel, "the carried state has {} tensors, this model keeps {} (one memory per layer)", state.size(),
           memory.size());
    for (std::size_t l = 0; l < memory.size(); ++l) {
      const auto it = state.find(fmt::format("mem{}", l));
      if (it == state.end()) fail(kModel, "the carried state lacks 'mem{}'", l);
      const Tensor& m = it->second;
      if (m.dim() != 3 || m.size(1) != B || m.size(2) != cfg_.d_model)
        fail(kModel, "memory 'mem{}' is {}, expected [M, {}, {}]", l, shape_str(m.shape()), B, cfg_.d_model);
      memory[l] = m;
    }
  }
  const std::int64_t M = memory[0].defined() ? memory[0].size(0) : 0;
  const std::int64_t Tk = M + T;

  Tensor x = dropout(input_->forward(tokens), cfg_.dropout, training, generator());
  std::vector<double> distances(static_cast<std::size_t>(Tk));
  for (std::int64_t p = 0; p < Tk; ++p) {
    const auto d = static_cast<double>(Tk - 1 - p);
    distances[static_cast<std::size_t>(p)] = clamp_len > 0 ? std::min(d, static_cast<double>(clamp_len)) : d;
  }
  const Tensor r = dropout(relative_positions(distances, cfg_.d_model, {.dtype = x.dtype(), .device = x.device()}),
                           cfg_.dropout, training, generator());
  const Tensor u = r_w_bias_ ? *r_w_bias_ : Tensor(), w = r_r_bias_ ? *r_r_bias_ : Tensor();
  const std::int64_t window = same_length ? mem_len : 0;

  LmState next;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    // The memory of layer l is its own input: the previous window's x_{l-1}, cut to mem_len.
    if (mem_len > 0) {
      // When the segment alone fills the memory, its rows are the memory (no join to copy).
      const Tensor all = M > 0 && mem_len > T ? concat({memory[l], x}, 0) : x;
      const std::int64_t keep = std::min(mem_len, all.size(0));
      next[fmt::format("mem{}", l)] = contiguous(detach(narrow(all, 0, all.size(0) - keep, keep)));
    }
    RelLayer& layer = *layers_[l];
    if (cfg_.recompute && training) {
      // Only the layer's input is kept; backward runs the layer again (autograd/recompute.h).
      x = recompute([&layer, window](const std::vector<Tensor>& in) {
        return layer.forward(in[0], in[1], in[2], in[3], in[4], window);
      }, {x, memory[l], r, u, w}, layer.parameters(), generator());
    } else {
      x = layer.forward(x, memory[l], r, u, w, window);
    }
  }
  return {x, next};
}

LanguageModel::Output TransformerXL::forward(const Tensor& tokens, const Tensor& targets, const LmState& state) {
  if (targets.shape() != tokens.shape())
    fail(kModel, "targets {} must have the shape of tokens {}", shape_str(targets.shape()), shape_str(tokens.shape()));
  auto [h, next] = features(tokens, state);
  Output out;
  out.loss = output_->loss(dropout(h, cfg_.dropout, is_training(), generator()), targets);
  out.objective = out.loss;
  out.state = std::move(next);
  return out;
}

std::pair<Tensor, LmState> TransformerXL::log_prob(const Tensor& tokens, const LmState& state) {
  auto [h, next] = features(tokens, state);
  return {output_->log_prob(dropout(h, cfg_.dropout, is_training(), generator())), std::move(next)};
}

PartRules TransformerXL::part_rules() const {
  PartRules rules = input_->part_rules("input.");
  rules.emplace_back("layers.", kPartContext);
  rules.emplace_back("r_w_bias", kPartContext);
  rules.emplace_back("r_r_bias", kPartContext);
  rules.emplace_back("output.", kPartInputOutput);
  return rules;
}

}  // namespace define::models
