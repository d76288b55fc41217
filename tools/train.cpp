// `define train --config FILE [--set key=value ...] [--run-dir DIR] [--resume [--reset-optimizer]
// [--reset-schedule]] [--init-from RUN_OR_CHECKPOINT]`: trains the
// language model (train/lm_trainer.h) or translation model (train/nmt_trainer.h) a config
// describes and reports validation and test perplexity. The run folder (default runs/<config
// name>) receives config.json, metrics.jsonl, vocab.txt (language models) or subword.model
// (translation), latest.ckpt and best.ckpt. --init-from fine-tunes: a new run from another run's
// weights (train::StartOptions).
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tools/command.h"
#include "tools/options.h"
#include "train/lm_trainer.h"
#include "train/nmt_trainer.h"

namespace define::cli {

int run_train(const std::vector<std::string>& args) {
  const Options opts = parse_options("train", args,
                                     {.required = {"config"},
                                      .repeated = {"set"},
                                      .optional = {"run-dir", "init-from"},
                                      .flags = {"resume", "reset-optimizer", "reset-schedule"}});
  if (opts.help) {
    fmt::print(
        "usage: define train --config FILE [--set key=value ...] [--run-dir DIR]\n"
        "                    [--resume [--reset-optimizer] [--reset-schedule]] [--init-from RUN_OR_CHECKPOINT]\n"
        "Trains the model of FILE (see configs/) and prints validation and test perplexity.\n"
        "  --set key=value  override a config value (dotted key, JSON value), repeatable\n"
        "  --run-dir DIR    where the run's files go (default runs/<config file name>)\n"
        "  --resume         continue the run in DIR from its latest checkpoint\n"
        "  --reset-optimizer   with --resume: the optimizer's state (momentum, moments, averaging) starts fresh\n"
        "  --reset-schedule    with --resume: the learning-rate schedule starts over (warm-up again, then\n"
        "                      over the steps left)\n"
        "  --init-from R    a new run from the weights of run folder R (best.ckpt, else latest.ckpt) or a\n"
        "                   checkpoint file, with its vocabulary or subword model; optimizer, schedule\n"
        "                   and data start fresh. Tensors are matched by name; those not found are listed\n");
    return 0;
  }
  Config cfg = load_config(opts);
  const std::string run_dir =
      opts.has("run-dir") ? opts.get("run-dir") : "runs/" + std::filesystem::path(opts.get("config")).stem().string();
  train::StartOptions start(opts.has("resume"));
  if (opts.has("init-from")) start.init_from = opts.get("init-from");
  start.reset_optimizer = opts.has("reset-optimizer");
  start.reset_schedule = opts.has("reset-schedule");
  if (train::is_translation_config(cfg)) {
    train::train_translation_model(cfg, run_dir, start);
  } else {
    train::train_language_model(cfg, run_dir, start);
  }
  return 0;
}

}  // namespace define::cli
