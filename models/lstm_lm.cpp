#include "models/lstm_lm.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"

namespace define::models {
namespace {

constexpr const char* kModel = "LstmLm";

void check_probability(const char* what, double p) {
  if (!(p >= 0.0 && p < 1.0)) fail(kModel, "{} must be in [0, 1), got {}", what, p);
}

}  // namespace

LstmLmConfig read_lstm_lm_config(const Config& model, std::int64_t vocab) {
  LstmLmConfig cfg;
  cfg.input = read_token_input_config(model.section("input"), vocab);
  cfg.hidden = model.get_int("hidden", cfg.hidden);
  cfg.layers = model.get_int("layers", cfg.layers);
  cfg.last_hidden = model.get_int("last_hidden", 0);
  const Config d = model.section("dropout");
  cfg.dropout_embedding = d.get_double("embedding", 0.0);
  cfg.dropout_input = d.get_double("input", 0.0);
  cfg.dropout_hidden = d.get_double("hidden", 0.0);
  cfg.dropout_output = d.get_double("output", 0.0);
  cfg.weight_drop = d.get_double("weight", 0.0);
  cfg.adaptive_dropout = d.get_double("adaptive", 0.0);
  return cfg;
}

LstmLm::LstmLm(const LstmLmConfig& cfg, Generator& gen) : LanguageModel(kModel), cfg_(cfg) {
  if (cfg.layers < 1) fail(kModel, "layers must be at least 1, got {}", cfg.layers);
  if (cfg.hidden < 1) fail(kModel, "hidden must be positive, got {}", cfg.hidden);
  check_probability("dropout.embedding", cfg.dropout_embedding);
  check_probability("dropout.input", cfg.dropout_input);
  check_probability("dropout.hidden", cfg.dropout_hidden);
  check_probability("dropout.output", cfg.dropout_output);
  check_probability("dropout.weight", cfg.weight_drop);
  if (cfg.dropout_embedding > 0 && (cfg.input.kind == TokenInputKind::Adaptive || cfg.input.adaptive_map ||
                                    cfg.input.kind == TokenInputKind::Projected || cfg.input.projected_map))
    fail(kModel, "dropout.embedding (whole-word dropout of the table) needs the plain table 'map'; an adaptive or "
                 "projected input or map has none");

  input_ = register_module("input", std::make_shared<TokenInput>(cfg.input, gen));
  embedding_dropout_ = register_module("embedding_dropout", std::make_shared<nn::EmbeddingDropout>(cfg.dropout_embedding));
  input_dropout_ = register_module("input_dropout", std::make_shared<nn::LockedDropout>(cfg.dropout_input));

  const std::int64_t last = cfg.last_hidden > 0 ? cfg.last_hidden : cfg.input.map_dim;
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(cfg.layers - 1), cfg.hidden);
  sizes.push_back(last);
  nn::LSTMOptions lopt;
  lopt.dropout = cfg.dropout_hidden;
  lopt.variational = true;  // AWD-LSTM's dropouth is locked dropout
  lstm_ = std::make_shared<nn::LSTM>(cfg.input.out_dim, sizes, lopt, gen);
  if (cfg.weight_drop > 0) {
    std::vector<std::string> names;
    for (std::int64_t k = 0; k < cfg.layers; ++k) names.push_back("weight_hh_l" + std::to_string(k));
    weight_drop_ = register_module("rnn", nn::weight_drop(lstm_, names, cfg.weight_drop));
  } else {
    register_module("rnn", lstm_);
  }
  output_dropout_ = register_module("output_dropout", std::make_shared<nn::LockedDropout>(cfg.dropout_output));
  TiedOutputConfig ocfg;
  ocfg.hidden_dim = last;
  ocfg.adaptive_dropout = cfg.adaptive_dropout;
  output_ = register_module("output", std::make_shared<TiedOutput>(*input_, ocfg, gen));
}

Tensor LstmLm::embed(const Tensor& tokens) const {
  if (cfg_.dropout_embedding > 0) return embedding_dropout_->forward(*input_, tokens, "map.weight");
  return input_->forward(tokens);
}

nn::LSTMOutput LstmLm::run_lstm(const Tensor& x, const nn::LSTMState& state) {
  return weight_drop_ ? weight_drop_->forward(x, state) : lstm_->forward(x, state);
}

nn::LSTMState LstmLm::lstm_state(const LmState& state) {
  nn::LSTMState s;
  for (std::size_t k = 0;; ++k) {
    const auto h = state.find(fmt::format("h{}", k)), c = state.find(fmt::format("c{}", k));
    if (h == state.end() || c == state.end()) break;
    s.h.push_back(h->second);
    s.c.push_back(c->second);
  }
  if (s.h.size() * 2 != state.size())
    fail(kModel, "the carried state has {} tensors, not the pairs h0, c0, h1, c1, ... of an LSTM", state.size());
  return s;
}

LmState LstmLm::lm_state(const nn::LSTMState& state) {
  LmState s;
  for (std::size_t k = 0; k < state.h.size(); ++k) {
    s[fmt::format("h{}", k)] = state.h[k];
    s[fmt::format("c{}", k)] = state.c[k];
  }
  return s;
}

void LstmLm::read_training_options(const Config& train) {
  set_regularisation(train.get_double("alpha", 2.0), train.get_double("beta", 1.0));
}

void LstmLm::set_regularisation(double alpha, double beta) {
  if (!(alpha >= 0) || !(beta >= 0)) fail(kModel, "train.alpha and train.beta must be >= 0, got {} and {}", alpha, beta);
  alpha_ = alpha;
  beta_ = beta;
}

LanguageModel::Output LstmLm::forward(const Tensor& tokens, const Tensor& targets, const LmState& state) {
  if (tokens.dim() != 2) fail(kModel, "tokens must be [T, B], got {} dims", tokens.dim());
  if (targets.shape() != tokens.shape())
    fail(kModel, "targets {} must have the shape of tokens {}", shape_str(targets.shape()), shape_str(tokens.shape()));
  const Tensor x = input_dropout_->forward(embed(tokens));
  nn::LSTMOutput r = run_lstm(x, lstm_state(state));
  const Tensor output = output_dropout_->forward(r.output);
  Output out;
  out.loss = output_->loss(output, targets);
  out.objective = out.loss;
  if (is_training()) {
    if (alpha_ > 0) out.objective = add(out.objective, mul(mean(mul(output, output)), alpha_));
    const std::int64_t T = r.output.shape()[0];
    if (beta_ > 0 && T > 1) {
      const Tensor d = sub(narrow(r.output, 0, 1, T - 1), narrow(r.output, 0, 0, T - 1));
      out.objective = add(out.objective, mul(mean(mul(d, d)), beta_));
    }
  }
  out.state = lm_state(r.state);
  return out;
}

std::pair<Tensor, LmState> LstmLm::log_prob(const Tensor& tokens, const LmState& state) {
  if (tokens.dim() != 2) fail(kModel, "tokens must be [T, B], got {} dims", tokens.dim());
  const Tensor x = input_dropout_->forward(embed(tokens));
  nn::LSTMOutput r = run_lstm(x, lstm_state(state));
  return {output_->log_prob(output_dropout_->forward(r.output)), lm_state(r.state)};
}

PartRules LstmLm::part_rules() const {
  PartRules rules = input_->part_rules("input.");
  rules.emplace_back("rnn.", kPartContext);
  rules.emplace_back("output.", kPartInputOutput);
  return rules;
}

}  // namespace define::models
