// `define train --config FILE [--set key=value ...] [--run-dir DIR] [--resume]`: trains the
// language model (train/lm_trainer.h) or translation model (train/nmt_trainer.h) a config
// describes and reports validation and test perplexity. The run folder (default runs/<config
// name>) receives config.json, metrics.jsonl, vocab.txt (language models) or subword.model
// (translation), latest.ckpt and best.ckpt.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tools/command.h"
#include "train/lm_trainer.h"
#include "train/nmt_trainer.h"
#include "tools/options.h"

namespace define::cli {

int run_train(const std::vector<std::string>& args) {
  const Options opts =
      parse_options("train", args, {.required = {"config"}, .repeated = {"set"}, .optional = {"run-dir"}, .flags = {"resume"}});
  if (opts.help) {
    fmt::print(
        "usage: define train --config FILE [--set key=value ...] [--run-dir DIR] [--resume]\n"
        "Trains the model of FILE (see configs/) and prints validation and test perplexity.\n"
        "  --set key=value  override a config value (dotted key, JSON value), repeatable\n"
        "  --run-dir DIR    where the run's files go (default runs/<config file name>)\n"
        "  --resume         continue the run in DIR from its latest checkpoint\n");
    return 0;
  }
  Config cfg = load_config(opts);
  const std::string run_dir =
      opts.has("run-dir") ? opts.get("run-dir") : "runs/" + std::filesystem::path(opts.get("config")).stem().string();
  if (train::is_translation_config(cfg)) {
    train::train_translation_model(cfg, run_dir, opts.has("resume"));
  } else {
    train::train_language_model(cfg, run_dir, opts.has("resume"));
  }
  return 0;
}

}  // namespace define::cli
