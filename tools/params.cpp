// `define params --config FILE [--set key=value ...]`: builds the model a config describes and
// prints its parameters split as the papers' tables are (DeFINE unit, context model,
// input-output, total), exact and in millions.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "models/registry.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {

int run_params(const std::vector<std::string>& args) {
  const Options opts = parse_options("params", args, {.required = {"config"}, .repeated = {"set"}, .optional = {"vocab"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define params --config FILE [--set key=value ...] [--vocab V]\n"
        "Prints the parameter count of the model in FILE (JSON, see configs/) by part: the DeFINE /\n"
        "DExTra unit, the context model and the input-output layers, plus the total. The vocabulary\n"
        "size comes from --vocab, else the config's model.vocab_size.\n");
    return 0;
  }
  Config cfg = load_config(opts);
  const std::int64_t vocab = opts.has("vocab") ? opts.get_int("vocab") : 0;
  // Counting needs the shapes, not trained values: a fixed seed keeps runs identical.
  Generator gen(0);
  const models::BuiltModel built = models::build_model(cfg.section("model"), vocab, gen);
  cfg.section("model").require_all_used();  // other sections belong to train/eval
  fmt::print("{} ({})\n", opts.get("config"), built.type);
  fmt::print("{}", models::format_parameter_table(models::count_parameter_parts(*built.module, built.parts)));
  return 0;
}

}  // namespace define::cli
