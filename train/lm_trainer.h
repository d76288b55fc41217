// Language-model training (`define train` for model.type lstm_lm, transformer_xl, delight_lm) and
// evaluation (`define eval`): the language-model task the model-agnostic training loop
// (train/training_loop.h) drives. The task owns the corpus, the batches and the state the model
// carries from window to window (models/language_model.h).
//
// Data (config section `data`, defaults in brackets): corpus [ptb] | dir (a folder with
// train.txt valid.txt test.txt or WikiText's wiki.{train,valid,test}.tokens; the config names one
// of the two, and a --set of either replaces the other), batch_size [20], eval_batch_size [10],
// test_batch_size [1], bptt [70] (the training window; Transformer-XL's tgt_len),
// eval_bptt [bptt] (the evaluation window), variable_length [true] (AWD-LSTM's random window
// lengths, with the learning rate scaled by the length), vocab_order [first] (ids in order of first
// occurrence, as AWD-LSTM; `frequency`: most frequent first, what adaptive bands need). The run's
// vocab.txt keeps the order, so eval and generate read the corpus with the same ids. cache [true]:
// the first load writes the vocabulary and token ids to a cache (data/id_cache.h; in the corpus
// folder's .define-cache/ when it is writable, else the run folder) that later loads read instead
// of tokenising, checked against the files' sizes and times and by CRC-32.
// Training (section `train`): update_freq [1] splits each window's streams (per process) into that
// many chunks, each run forward and backward with its own slice of the carried state and summed
// into the step (Transformer-XL's batch_chunk): the same step in a K-th of the activation memory.
// The model's own training keys (AWD-LSTM's train.alpha / train.beta) are read by the model.
//
// Resume: a checkpoint holds, besides the loop's part, the data iterator's generator and
// position and the carried state (LSTM h / c, Transformer-XL memories) as run tensors.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/tensor.h"
#include "models/language_model.h"
#include "train/training_loop.h"

namespace define::train {

// Runs (or, with resume, continues) the training a config describes, in run_dir. Prints progress
// and a final summary; returns the final losses.
TrainResult train_language_model(Config& cfg, const std::string& run_dir, const StartOptions& start);

// Mean NLL per token of `batches` [T, B] (data::batchify), in eval mode without a graph (the
// model's mode is restored). Every predicted token is scored exactly once. Two protocols:
//   context 0   (the trainer's) windows of bptt tokens one after another, the state carried across
//               windows (a Transformer-XL's memory, an LSTM's h and c; nothing for a DeLighT LM);
//   context C   (fairseq's eval_lm --context-window C, with bptt as the window) windows of at most
//               bptt tokens advancing by bptt - C, no state carried: each window scores its tokens
//               after the first C (all of them in the first window), so every scored token sees at
//               least min(C, its position) earlier tokens. 0 < C < bptt.
// With context, a window's scored loss is its summed loss minus that of its unscored prefix run
// alone: a causal model without carried state predicts the prefix identically either way.
double evaluate_lm(models::LanguageModel& model, const Tensor& batches, std::int64_t bptt, std::int64_t context = 0);

}  // namespace define::train
