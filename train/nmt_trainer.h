// Translation training (`define train` for model.type transformer_nmt and delight_nmt) on
// line-aligned parallel text: the translation task the model-agnostic training loop
// (train/training_loop.h) drives.
//
// Data (config section `data`, defaults in brackets): corpus [multi30k] | dir (a folder with
// <split>.<lang> files, overrides corpus), source [de], target [en], tokenized [false] (multi30k:
// read its tok/ folder, lowercased and tokenised, instead of the raw text), train [train],
// valid [val], test [test] (the splits' file stems), max_len [128] (pairs with a longer side, in
// subwords with eos, are skipped and counted), max_tokens [4096] (tokens per batch, padding
// included, as fairseq's --max-tokens), eval_max_tokens [max_tokens], and the subword section:
// type [bpe] (or unigram), vocab_size [8000], character_coverage [1.0]; cache [true] (each split's
// subword ids kept in a cache file that later runs read, data/parallel_cache.h). The joint SentencePiece
// model is trained on the training split's two sides when a run starts, saved as
// subword.model in the run folder and reused on resume; checkpoints record its fingerprint.
// Keys of the `train` section this task reads: label_smoothing [0.1], update_freq [1]
// (batches whose gradients are summed into one optimizer step).
//
// The logged loss is the per-token NLL without smoothing (so its exp is the perplexity); the
// differentiated objective is the label-smoothed cross entropy summed over the step's target
// tokens divided by their number (fairseq's sentence-average-free normalisation).
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "train/training_loop.h"

namespace define::train {

TrainResult train_translation_model(Config& cfg, const std::string& run_dir, const StartOptions& start);

// Whether a config's model.type is a translation model (then `define train` goes here).
bool is_translation_config(const Config& cfg);

// data.subword.vocab_size (default 8000) of a translation config's data section, without looking
// for the corpus: the vocabulary size `define params` counts with.
std::int64_t read_translation_data_subword_size(const Config& data);

}  // namespace define::train
