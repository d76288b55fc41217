// What every translation model of define offers the training task and `define translate`: the
// teacher-forced forward pass of training and evaluation, and incremental decoding for beam search.
//
// Layout: token batches are time-first, src [S, B] and tgt [T, B] (int64), right-padded with the
// model's padding id; a source position is padding exactly where src == padding_idx(). The decoder
// input is the target shifted right (bos, y_1 .. y_n); what it predicts is y_1 .. y_n, eos.
//
// Incremental decoding: begin_decoding(src) runs the encoder once and returns a state holding
// whatever the decoder needs to produce one position at a time (for the Transformer, the projected
// keys and values of the encoder output and of every earlier target position, per layer).
// decode_step(state, prev) feeds the token each row chose last and returns the logits of the next;
// select_rows(state, rows) keeps and reorders rows (beam search expands each sentence to `beam`
// rows, then follows the surviving hypotheses). The logits of step t equal those of logits() at
// position t over the same prefix (tests/models/translation_model_test.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "models/parameter_parts.h"
#include "nn/module.h"

namespace define::models {

class TranslationModel : public nn::Module {
 public:
  using nn::Module::Module;

  virtual std::int64_t vocab() const = 0;
  virtual std::int64_t padding_idx() const = 0;

  // src [S, B], tgt_in [T, B] -> logits [T, B, V] (the decoder sees tgt_in[0 .. t] at position t).
  virtual Tensor logits(const Tensor& src, const Tensor& tgt_in) const = 0;
  // The training objective: the label-smoothed cross entropy of logits(src, tgt_in) against tgt_out
  // [T, B], summed over the non-padding target tokens, with graph; and, in *nll_sum when given, the
  // plain NLL summed alike (no graph; what the trainer logs). The same values as cross_entropy over
  // logits() (tests/models/translation_model_test.cpp), without the logits' gradient ever built
  // (linear_cross_entropy): on the CPU the [T * B, V] logits cross memory once each way.
  virtual Tensor loss_sum(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
                          Tensor* nll_sum = nullptr) const = 0;

  struct DecodingState {
    virtual ~DecodingState() = default;
    std::int64_t rows = 0;   // N: sentences x beams being decoded
    std::int64_t steps = 0;  // target positions fed so far
  };
  // Eval mode only (dropout would make decoding random): throws otherwise.
  virtual std::unique_ptr<DecodingState> begin_decoding(const Tensor& src) const = 0;
  // prev [N] int64: each row's latest token (bos at the first step) -> logits [N, V].
  virtual Tensor decode_step(DecodingState& state, const Tensor& prev) const = 0;
  // rows [N'] int64 on the model's device, each in [0, N).
  virtual void select_rows(DecodingState& state, const Tensor& rows) const = 0;

  // The papers' parameter parts (DeFINE unit, context model, input-output).
  virtual PartRules part_rules() const = 0;
};

// Checks a token batch is [T, B] int64 (or int32); `who` and `what` name it in the error.
void check_token_batch(const char* who, const char* what, const Tensor& tokens);

}  // namespace define::models
