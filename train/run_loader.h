// A finished (or running) training run, opened for the commands that use a trained model (eval,
// generate, export-cache, corrmap, export): the run folder's resolved config.json rebuilds the
// model, vocab.txt gives the words, and a checkpoint (best.ckpt, else latest.ckpt, or one named
// explicitly) gives the weights. Every missing or inconsistent piece is an error naming the file.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "data/corpus.h"
#include "models/language_model.h"

namespace define::train {

struct LoadedRun {
  std::string dir;
  std::string checkpoint;  // the file the weights came from
  Config config;           // the run's resolved config
  data::Vocabulary vocab;
  std::shared_ptr<models::LanguageModel> model;  // in eval mode
  // The model's token representation; throws naming the model type when it has none.
  models::TokenInput& token_input() const;
};

// The checkpoint a command reads: `checkpoint` when given, else <dir>/best.ckpt if it exists,
// else <dir>/latest.ckpt. Throws naming the folder when it is missing or has neither.
std::string choose_checkpoint(const std::string& dir, const std::string& checkpoint);

// checkpoint: a path, or "" for <dir>/best.ckpt if it exists, else <dir>/latest.ckpt.
LoadedRun load_run(const std::string& dir, const std::string& checkpoint = "");

}  // namespace define::train
