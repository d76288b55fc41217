// `define params --config FILE [--set key=value ...]`: builds the model a config describes and
// prints its parameters split as the papers' tables are (DeFINE unit, context model,
// input-output, total), exact and in millions.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "models/registry.h"
#include "nn/init.h"
#include "train/memory_plan.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {

int run_params(const std::vector<std::string>& args) {
  const Options opts = parse_options("params", args, {.required = {"config"}, .repeated = {"set"}, .optional = {"vocab-size"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define params --config FILE [--set key=value ...] [--vocab-size V]\n"
        "Prints the parameter count of the model in FILE (JSON, see configs/) by part: the DeFINE /\n"
        "DExTra unit, the context model and the input-output layers, plus the total. The vocabulary\n"
        "size comes from --vocab-size, else the config's model.vocab_size, else the training split of the\n"
        "corpus the config's data section names (as `define train` takes it; translation: the subword\n"
        "model's data.subword.vocab_size).\n");
    return 0;
  }
  Config cfg = load_config(opts);
  const std::int64_t vocab = opts.has("vocab-size") ? opts.get_int("vocab-size") : train::config_vocab_size(cfg);
  // Counting needs the shapes, not values: no random draws.
  Generator gen(0);
  const nn::init::ShapesOnlyGuard shapes_only;
  const models::BuiltModel built = models::build_model(cfg.section("model"), vocab, gen);
  cfg.section("model").require_all_used();  // other sections belong to train/eval
  fmt::print("{} ({})\n", opts.get("config"), built.type);
  fmt::print("{}", models::format_parameter_table(models::count_parameter_parts(*built.module, built.parts)));
  return 0;
}

}  // namespace define::cli
