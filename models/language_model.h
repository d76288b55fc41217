// What every language model of define offers the training loop and the commands (train, eval,
// generate, corrmap, export-cache): a forward pass over one window of a time-major batch that
// carries a state into the next window. The state is whatever the model remembers across
// windows: the LSTM's (h, c) per layer, Transformer-XL's cached hidden states per layer, nothing
// for a model that sees one window at a time (DeLighT). It is a set of named tensors so that the
// trainer can detach it, move it between devices and save it in checkpoints without knowing what
// it holds (an empty state means "start of a stream").
#pragma once

#include <map>
#include <string>
#include <utility>

#include "core/config.h"
#include "core/tensor.h"
#include "models/parameter_parts.h"
#include "nn/module.h"

namespace define::models {

class TokenInput;

using LmState = std::map<std::string, Tensor>;

// The same tensors cut from the graph (a carried state passes no gradient to the past).
LmState detach(const LmState& state);
LmState to_device(const LmState& state, Device device);

class LanguageModel : public nn::Module {
 public:
  using nn::Module::Module;

  struct Output {
    Tensor loss;       // mean NLL per target token (scalar): what is logged and evaluated
    Tensor objective;  // what training differentiates: loss plus the model's regularisers
    LmState state;     // to carry (detached by the caller) into the next window
  };
  // tokens, targets [T, B] int64 on the model's device; state empty or from the previous window.
  virtual Output forward(const Tensor& tokens, const Tensor& targets, const LmState& state) = 0;
  // Log-probabilities of the next token, [T, B, V], and the new state (eval / generation).
  virtual std::pair<Tensor, LmState> log_prob(const Tensor& tokens, const LmState& state) = 0;

  // Which dimension of the carried state tensor `name` is the batch (B) one: data-parallel
  // training gathers the ranks' shards of the state along it into one checkpoint and cuts its
  // own shard back out on resume. Models that carry no state are never asked.
  virtual std::int64_t state_batch_dim(const std::string& name) const;

  // The model's own keys of the config's `train` section (AWD-LSTM's activation regularisers);
  // read once by the trainer before training. Default: none.
  virtual void read_training_options(const Config& /*train*/) {}
  // How much context evaluation may keep (Transformer-XL's memory length at evaluation); models
  // without a memory refuse a positive value.
  virtual void set_eval_memory(std::int64_t mem_len);

  // The token representation the cache, correlation-map and export-cache commands work on, or
  // null when the model has none of the TokenInput kinds.
  virtual const TokenInput* token_input() const { return nullptr; }
  TokenInput* token_input() { return const_cast<TokenInput*>(std::as_const(*this).token_input()); }
  // The papers' parameter parts (DeFINE unit, context model, input-output).
  virtual PartRules part_rules() const = 0;
};

}  // namespace define::models
