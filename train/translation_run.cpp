#include "train/translation_run.h"

#include <filesystem>

#include "core/error.h"
#include "models/registry.h"
#include "nn/checkpoint.h"
#include "train/nmt_data.h"
#include "train/run_loader.h"

namespace define::train {

TranslationRun load_translation_run(const std::string& dir, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  const char* op = "load_translation_run";
  const std::string ckpt_path = choose_checkpoint(dir, checkpoint);
  Config config = Config::from_file((fs::path(dir) / "config.json").string());
  data::Subword subword = data::Subword::load(subword_model_path(dir));
  // The checkpoint first: a damaged one is reported as such, and it names the subword model it
  // was trained with.
  const nn::Checkpoint ckpt = nn::load_checkpoint(ckpt_path);
  if (const auto v = ckpt.run.find("subword"); v == ckpt.run.end()) {
    fail(op, "'{}' is not a translation checkpoint (it names no subword model)", ckpt_path);
  } else if (v->second != subword.fingerprint()) {
    fail(op, "'{}' is not the subword model '{}' was trained with (the file has {}, the checkpoint expects {}): it "
             "was changed or damaged", subword_model_path(dir).string(), ckpt_path, subword.fingerprint(), v->second);
  }
  Generator gen(0);  // construction only: the checkpoint overwrites every value
  models::BuiltModel built = models::build_model(config.section("model"), subword.size(), gen);
  auto model = std::dynamic_pointer_cast<models::TranslationModel>(built.module);
  if (!model) fail(op, "{}: model.type '{}' is not a translation model", dir, built.type);
  nn::restore_checkpoint(ckpt, *model, nullptr);
  model->eval();
  return TranslationRun{dir, ckpt_path, std::move(config), std::move(subword), std::move(model)};
}

}  // namespace define::train
