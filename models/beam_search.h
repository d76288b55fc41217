// Batched beam search over a TranslationModel's incremental decoder (fairseq's SequenceGenerator
// in its default form): each sentence of the batch keeps `beam` live hypotheses; at every step the
// 2 x beam best continuations by total log-probability are looked at in order, a continuation that
// ends in eos among the first `beam` of them is finished (score = total log-probability / length
// ^ lenpen, length counting the eos), the first `beam` others become the next live hypotheses. A
// sentence is done when `beam` hypotheses are finished. Lengths as fairseq counts them: a
// hypothesis holds at most max_len_a x source length + max_len_b tokens before its eos (the source
// length counting neither padding nor eos), after which only eos may follow; eos cannot end a
// hypothesis of fewer than min_len tokens (1 by default: no empty translation). Padding and bos are
// never generated. Beam 1 is greedy decoding.
//
// Rows of finished sentences leave the decoder's state (TranslationModel::select_rows), so a batch
// gets cheaper as its sentences finish.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/translation_model.h"

namespace define::models {

struct BeamSearchOptions {
  std::int64_t beam = 5;
  double lenpen = 1.0;
  double max_len_a = 0.0;
  std::int64_t max_len_b = 200;
  std::int64_t min_len = 1;       // tokens before eos at the least (fairseq's --min-len)
  std::int64_t bos = 2, eos = 3;  // define's subword ids (data/subword.h)
  std::int64_t unk = -1;          // >= 0 with allow_unk false: never generate it
  bool allow_unk = true;
  std::int64_t nbest = 1;         // finished hypotheses returned per sentence, best first (<= beam)
};

struct Hypothesis {
  std::vector<std::int32_t> tokens;  // without bos and eos
  double score = 0;                  // total log-probability / length^lenpen
  double log_prob = 0;               // total log-probability (eos included)
};

// Throws naming the first bad option (beam < 1, nbest outside [1, beam], bos / eos outside the
// vocabulary, ...): commands check their options before reading any input.
void check_beam_search_options(const BeamSearchOptions& opt, std::int64_t vocab);

// src [S, B] int64 on the model's device (right-padded with the model's padding id). The model
// must be in eval mode. Returns, per sentence, its nbest hypotheses, best first.
std::vector<std::vector<Hypothesis>> beam_search(const TranslationModel& model, const Tensor& src,
                                                 const BeamSearchOptions& opt);

}  // namespace define::models
