// A trained translation run, opened for `define translate`: config.json rebuilds the model,
// subword.model encodes and decodes text, a checkpoint (best.ckpt, else latest.ckpt, or one named)
// gives the weights. A subword model other than the one the checkpoint was trained with is refused.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "data/subword.h"
#include "models/translation_model.h"

namespace define::train {

struct TranslationRun {
  std::string dir;
  std::string checkpoint;
  Config config;
  data::Subword subword;
  std::shared_ptr<models::TranslationModel> model;  // in eval mode, on the CPU
};

TranslationRun load_translation_run(const std::string& dir, const std::string& checkpoint = "");

}  // namespace define::train
