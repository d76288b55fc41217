#include "train/run_loader.h"

#include <filesystem>

#include "core/error.h"
#include "models/registry.h"
#include "models/token_representation.h"
#include "nn/checkpoint.h"

namespace define::train {

std::string choose_checkpoint(const std::string& dir, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  const char* op = "load_run";
  // The error_code forms: a name the system refuses (too long, ...) is the user's error, not an
  // exception from <filesystem>.
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(op, "run folder '{}' does not exist{}", dir, ec ? " (" + ec.message() + ")" : std::string());
  if (!checkpoint.empty()) return checkpoint;
  const fs::path best = fs::path(dir) / "best.ckpt", latest = fs::path(dir) / "latest.ckpt";
  if (fs::exists(best, ec)) return best.string();
  if (fs::exists(latest, ec)) return latest.string();
  fail(op, "run folder '{}' has no checkpoint (best.ckpt or latest.ckpt)", dir);
}

LoadedRun load_run(const std::string& dir, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  const char* op = "load_run";
  LoadedRun run;
  run.dir = dir;
  run.checkpoint = choose_checkpoint(dir, checkpoint);
  run.config = Config::from_file((fs::path(dir) / "config.json").string());
  run.vocab = data::Vocabulary::load(fs::path(dir) / "vocab.txt");
  // The checkpoint first: a damaged one is reported as such, and it says which vocabulary it
  // was trained with (checkpoints of older versions do not).
  const nn::Checkpoint ckpt = nn::load_checkpoint(run.checkpoint);
  if (const auto v = ckpt.run.find("vocab"); v != ckpt.run.end() && v->second != run.vocab.fingerprint())
    fail(op, "'{}' is not the vocabulary '{}' was trained with (the file has {}, the checkpoint expects {}): it was "
             "changed or damaged", (fs::path(dir) / "vocab.txt").string(), run.checkpoint, run.vocab.fingerprint(),
         v->second);
  // The initial values are overwritten by the checkpoint; a fixed seed keeps construction
  // deterministic.
  Generator gen(0);
  models::BuiltModel built = models::build_model(run.config.section("model"), run.vocab.size(), gen);
  run.model = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
  if (!run.model) fail(op, "{}: model.type '{}' is not a language model", dir, built.type);
  nn::restore_checkpoint(ckpt, *run.model, nullptr);
  run.model->eval();
  return run;
}

models::TokenInput& LoadedRun::token_input() const {
  models::TokenInput* input = model->token_input();
  if (!input)
    fail("load_run", "{}: the {} model has no token representation of the lstm_lm / transformer_xl kinds (its "
                     "embedding is built into the model)", dir, model->type_name());
  return *input;
}

}  // namespace define::train
