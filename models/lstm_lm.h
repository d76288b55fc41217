// LSTM language model: token representation (models/token_representation.h: standard embedding,
// projective, adaptive, DeFINE in every form, DExTra) -> stacked LSTM -> classifier tied to the
// representation's table, with AWD-LSTM's regularisers (Merity et al. 2018):
//
//   e  = input(tokens)           embedding dropout (dropoute) drops whole rows of the map table
//   e  = LockedDropout(e)        dropouti: one mask per sequence, shared over time
//   h  = LSTM(e)                 hidden sizes [hidden] * (layers - 1) + [last]; weight drop
//                                (wdrop) on every weight_hh; locked dropout (dropouth) between
//                                layers
//   h  = LockedDropout(h)        dropout
//   loss = output(h, targets)    tied: last = n (the map width) unless set, else a projection
//
// In training, the objective adds AWD-LSTM's activation regularisers (train.alpha, train.beta,
// read by read_training_options; 2 and 1 unless set, AWD-LSTM's values): AR alpha * mean(h^2) of
// the dropped last-layer output and TAR beta * mean((h_t - h_{t-1})^2) of the raw one (Merity et
// al. 2018, 4.6).
// The carried state holds h0, c0, h1, c1, ... (one pair per layer).
//
// The last LSTM layer's width defaults to the map width n, so tying needs no projection: with
// V = 10,000, n = 400, hidden 1150 and 3 layers this is AWD-LSTM, 24,221,600 parameters; with
// the DeFINE input (n = 128, m = 400) the last layer is 128 wide (spec §5.3).
//
// Parameter names: input.*, rnn.module.weight_hh_l0 (weight drop wraps the LSTM as "module";
// rnn.weight_hh_l0 without weight drop), output.bias. Parts: the DeFINE / DExTra unit,
// "context model" = the LSTM, "input-output" = tables, projections, softmax.
#pragma once

#include <cstdint>
#include <memory>

#include "core/config.h"
#include "models/language_model.h"
#include "models/parameter_parts.h"
#include "models/token_representation.h"
#include "nn/embedding_dropout.h"
#include "nn/locked_dropout.h"
#include "nn/lstm.h"
#include "nn/weight_drop.h"

namespace define::models {

struct LstmLmConfig {
  TokenInputConfig input;
  std::int64_t hidden = 1150;
  std::int64_t layers = 3;
  std::int64_t last_hidden = 0;     // 0: the map width n (tied without a projection)
  double dropout_embedding = 0.0;   // dropoute
  double dropout_input = 0.0;       // dropouti
  double dropout_hidden = 0.0;      // dropouth
  double dropout_output = 0.0;      // dropout
  double weight_drop = 0.0;         // wdrop
  double adaptive_dropout = 0.0;    // adaptive softmax input/tail dropout
};

// Reads the `model` section: vocab_size (required unless given), input (see
// read_token_input_config), hidden, layers, last_hidden, dropout.{embedding,input,hidden,output,
// weight}, adaptive_dropout.
LstmLmConfig read_lstm_lm_config(const Config& model, std::int64_t vocab);

class LstmLm : public LanguageModel {
 public:
  explicit LstmLm(const LstmLmConfig& cfg, Generator& gen = default_generator());

  Output forward(const Tensor& tokens, const Tensor& targets, const LmState& state = {}) override;
  std::pair<Tensor, LmState> log_prob(const Tensor& tokens, const LmState& state = {}) override;
  std::int64_t state_batch_dim(const std::string& /*name*/) const override { return 0; }  // h, c [B, H]
  // train.alpha [2] and train.beta [1] (AWD-LSTM's defaults).
  void read_training_options(const Config& train) override;
  void set_regularisation(double alpha, double beta);

  const LstmLmConfig& config() const { return cfg_; }
  const TokenInput& input() const { return *input_; }
  const TokenInput* token_input() const override { return input_.get(); }
  const nn::LSTM& lstm() const { return *lstm_; }
  PartRules part_rules() const override;

  // The carried state as the LSTM takes it, and back (h<k>, c<k> per layer).
  static nn::LSTMState lstm_state(const LmState& state);
  static LmState lm_state(const nn::LSTMState& state);

 private:
  nn::LSTMOutput run_lstm(const Tensor& x, const nn::LSTMState& state);
  Tensor embed(const Tensor& tokens) const;

  LstmLmConfig cfg_;
  std::shared_ptr<TokenInput> input_;
  std::shared_ptr<nn::EmbeddingDropout> embedding_dropout_;
  std::shared_ptr<nn::LockedDropout> input_dropout_, output_dropout_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::WeightDrop<nn::LSTM>> weight_drop_;  // null without weight drop
  std::shared_ptr<TiedOutput> output_;
  double alpha_ = 0.0, beta_ = 0.0;
};

}  // namespace define::models
