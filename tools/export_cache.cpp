// `define export-cache --run DIR [--checkpoint F] --out cache.safetensors`
// Writes the token cache of a trained model (DeFINE paper §3.4): once trained, the unit maps
// each token id to a fixed m-dimensional vector, so the V x m table of those vectors can stand
// in for map table + unit at inference (`define eval --cache`), at the cost of V x m memory.
// File layout: models/token_cache.h.
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/token_cache.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/run_loader.h"

namespace define::cli {

int run_export_cache(const std::vector<std::string>& args) {
  const char* op = "export-cache";
  const Options opts =
      parse_options(op, args, {.required = {"run", "out"}, .repeated = {}, .optional = {"checkpoint"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define export-cache --run DIR [--checkpoint F] --out cache.safetensors\n"
        "Writes the V x m table of the trained unit's output for every vocabulary word (paper 3.4),\n"
        "which `define eval --cache` uses instead of the unit. Inputs with a unit only (define,\n"
        "define-iclr, dextra, projective).\n"
        "  --checkpoint F  weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n");
    return 0;
  }
  const train::LoadedRun run = train::load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  const models::TokenInput& input = run.token_input();
  if (!input.has_unit())
    fail(op,
         "the model of {} has input type '{}', which has no unit to cache: its table already is the "
         "per-token representation (export-cache applies to define, define-iclr, dextra and projective inputs)",
         run.dir, models::to_string(input.config().kind));
  const std::string out = opts.get("out");
  const auto start = std::chrono::steady_clock::now();
  models::save_token_cache(out, input, run.checkpoint);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::int64_t V = input.config().vocab, m = input.out_dim();
  fmt::print("wrote {}: {} x {} table ({:.1f} MiB) of the {} unit of {} in {:.2f} s\n", out, V, m,
             static_cast<double>(V * m * 4) / (1 << 20), models::to_string(input.config().kind), run.checkpoint,
             seconds);
  return 0;
}

}  // namespace define::cli
