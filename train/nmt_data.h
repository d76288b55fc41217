// The parallel data of a translation run, as its config's `data` section names it
// (train/nmt_trainer.h lists the keys): where the files are, and the subword model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/config.h"
#include "data/parallel.h"
#include "data/subword.h"

namespace define::train {

struct TranslationDataSettings {
  std::filesystem::path dir;
  std::string source = "de", target = "en";
  std::string train = "train", valid = "val", test = "test";
  std::int64_t max_len = 128, max_tokens = 4096, eval_max_tokens = 4096;
  data::SubwordOptions subword;
  bool cache = true;  // data.cache: keep each split's subword ids in a cache file (data/parallel_cache.h)

  std::filesystem::path file(const std::string& split, const std::string& lang) const {
    return dir / (split + "." + lang);
  }
};

TranslationDataSettings read_translation_data(const Config& data);

// The run folder's subword model file.
inline std::filesystem::path subword_model_path(const std::filesystem::path& run_dir) {
  return run_dir / "subword.model";
}

}  // namespace define::train
