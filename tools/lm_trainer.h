// Training and evaluation of word-level language models (the `define train` / `define eval`
// commands): AWD-LSTM's recipe (Merity et al. 2018) for any model.type = lstm_lm config —
// truncated BPTT with variable sequence length and the learning rate scaled by it, activation
// and temporal activation regularisation, gradient-norm clipping, SGD / Adam / NT-ASGD with
// evaluation on the averaged weights once averaging has started — and the run's artifacts
// (resolved config, metrics.jsonl, checkpoints, vocabulary).
//
// Config sections it reads (defaults in brackets):
//   data.corpus [ptb] | data.dir (a folder with train.txt valid.txt test.txt, overrides corpus),
//   data.batch_size [20], data.eval_batch_size [10], data.test_batch_size [1], data.bptt [70],
//   data.variable_length [true]
//   train.optimizer [ntasgd] (sgd | adam | adamw | ntasgd), train.lr [30], train.weight_decay [1.2e-6],
//   train.momentum [0], train.clip [0.25], train.epochs [1], train.max_minutes [0 = no limit],
//   train.max_steps [0 = no limit], train.alpha [2] (AR), train.beta [1] (TAR), train.nonmono [5],
//   train.log_interval [50], train.checkpoint_interval [0 = once an epoch], train.seed [1111],
//   train.threads [2]
//
// Resume: a checkpoint holds the model, the optimizer, both generators (the global one and the
// data iterator's), the data position, the carried recurrent state, the epoch and step, the best
// validation loss and the time spent; `--resume` continues with the same losses an
// uninterrupted run would have had.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/tensor.h"
#include "models/lstm_lm.h"

namespace define::cli {

struct TrainResult {
  double valid_loss = 0;  // of the best checkpoint
  double test_loss = 0;
  std::int64_t steps = 0;
  double seconds = 0;
};

// Runs (or, with resume, continues) the training a config describes, in run_dir. Prints progress
// and a final summary; returns the final losses.
TrainResult train_language_model(Config& cfg, const std::string& run_dir, bool resume);

// Mean NLL per token of `batches` [T, B] (data::batchify), in windows of bptt with the state
// carried across windows, in eval mode without a graph (the model's mode is restored).
double evaluate_lm(models::LstmLM& model, const Tensor& batches, std::int64_t bptt);

}  // namespace define::cli
