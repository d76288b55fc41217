// `define eval --run DIR [--checkpoint F] [--split valid|test] [--cache FILE] [--compare]
//               [--batch-size B] [--bptt N] [--context-window C] [--mem-len N] [--threads N] [--json]`
// Perplexity of a trained language model on a split of the corpus its config names, computed as
// the trainer computes it (train/lm_trainer.h: train::evaluate_lm), so the numbers match the run's final
// ones: the same batch size (data.eval_batch_size for valid, data.test_batch_size for test) and
// bptt unless overridden (--mem-len sets a Transformer-XL memory length). The corpus is read against the run's saved
// vocabulary, so ids match.
// --context-window C evaluates as fairseq's eval_lm --context-window does (train::evaluate_lm):
// windows of bptt tokens advancing by bptt - C, no state carried, every token scored once with at
// least C tokens of context (fewer only at the start of a stream); the protocol for models without
// recurrent state (the DeLighT LM), and one every language model can be compared under.
//
// --cache FILE: the token cache of `define export-cache` replaces the DeFINE unit (paper §3.4:
// one table lookup per token instead of the unit). --compare evaluates with the unit and with
// the cache (FILE, or computed in memory when --cache is not given), prints both timings, and
// fails when the perplexities disagree by more than 1e-4 relative.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "models/token_cache.h"
#include "tools/command.h"
#include "train/corpus_location.h"
#include "train/lm_trainer.h"
#include "tools/options.h"
#include "train/run_loader.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "eval";
constexpr double kCompareTolerance = 1e-4;

struct Measurement {
  double loss = 0;
  std::int64_t tokens = 0;
  double seconds = 0;
};

Measurement measure(models::LanguageModel& model, const Tensor& batches, std::int64_t bptt, std::int64_t context) {
  const auto start = std::chrono::steady_clock::now();
  Measurement m;
  m.loss = train::evaluate_lm(model, batches, bptt, context);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.tokens = (batches.size(0) - 1) * batches.size(1);  // every row but the last is an input row
  return m;
}

void report(const std::string& mode, const Measurement& m, bool json) {
  const double tok_s = m.seconds > 0 ? static_cast<double>(m.tokens) / m.seconds : 0.0;
  if (json) {
    fmt::print("{{\"mode\": \"{}\", \"loss\": {:.17g}, \"perplexity\": {:.17g}, \"tokens\": {}, \"seconds\": {:.6f}, "
               "\"tokens_per_s\": {:.1f}}}\n",
               mode, m.loss, std::exp(m.loss), m.tokens, m.seconds, tok_s);
  } else {
    fmt::print("{:<6} loss {:.4f} | perplexity {:.2f} | {} tokens in {:.2f} s ({:.0f} tokens/s)\n", mode + ":", m.loss,
               std::exp(m.loss), m.tokens, m.seconds, tok_s);
  }
}

std::int64_t positive_option(const Options& opts, const char* name, std::int64_t fallback) {
  if (!opts.has(name)) return fallback;
  const std::int64_t v = opts.get_int(name);
  if (v < 1) fail(kOp, "--{} must be positive, got {}", name, v);
  return v;
}

}  // namespace

int run_eval(const std::vector<std::string>& args) {
  const Options opts = parse_options(
      kOp, args,
      {.required = {"run"},
       .repeated = {},
       .optional = {"checkpoint", "split", "cache", "batch-size", "bptt", "context-window", "mem-len", "threads"},
       .flags = {"compare", "json"}});
  if (opts.help) {
    fmt::print(
        "usage: define eval --run DIR [--checkpoint F] [--split valid|test] [--cache FILE] [--compare]\n"
        "                   [--batch-size B] [--bptt N] [--context-window C] [--mem-len N] [--threads N]\n"
        "                   [--json]\n"
        "Prints loss, perplexity, tokens and tokens/s of the run's model on a split of its corpus.\n"
        "  --checkpoint F  weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n"
        "  --split S       valid (default) or test\n"
        "  --cache FILE    look token representations up in a table from `define export-cache`\n"
        "                  instead of running the DeFINE unit\n"
        "  --compare       evaluate with the unit and with the cache (FILE, or computed in memory);\n"
        "                  fails when the perplexities differ by more than 1e-4 relative\n"
        "  --batch-size B  streams (default: the run's data.eval_batch_size for valid,\n"
        "                  data.test_batch_size for test: the trainer's numbers)\n"
        "  --bptt N        window length (default the run's data.eval_bptt, else data.bptt)\n"
        "  --context-window C  windows advance by N - C tokens and carry no state: each scores its\n"
        "                  tokens after the first C, so every token sees at least C earlier ones\n"
        "                  (fairseq's eval_lm --context-window; default 0: windows one after another,\n"
        "                  the state carried across them, as the trainer evaluates)\n"
        "  --mem-len N     Transformer-XL: keep N positions of memory (default the run's\n"
        "                  model.eval_mem_len, else model.mem_len)\n"
        "  --threads N     CPU threads (default the run's train.threads)\n"
        "  --json          one JSON object per evaluation instead of the text lines\n");
    return 0;
  }
  const std::string split = opts.has("split") ? opts.get("split") : "valid";
  if (split != "valid" && split != "test") fail(kOp, "--split must be valid or test, got '{}'", split);

  train::LoadedRun run = train::load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  const Config data_cfg = run.config.section("data");
  const std::int64_t batch_size = positive_option(
      opts, "batch-size",
      split == "valid" ? data_cfg.get_int("eval_batch_size", 10) : data_cfg.get_int("test_batch_size", 1));
  const std::int64_t bptt =
      positive_option(opts, "bptt", data_cfg.get_int("eval_bptt", data_cfg.get_int("bptt", 70)));
  const std::int64_t context = opts.has("context-window") ? opts.get_int("context-window") : 0;
  if (context < 0 || (context > 0 && context >= bptt))
    fail(kOp, "--context-window must be at least 0 and less than the window (--bptt {}), got {}", bptt, context);
  if (opts.has("mem-len")) run.model->set_eval_memory(positive_option(opts, "mem-len", 0));
  omp_set_num_threads(static_cast<int>(positive_option(opts, "threads", run.config.section("train").get_int("threads", 2))));

  const std::string corpus_dir =
      data_cfg.has("dir") ? data_cfg.get_string("dir") : train::find_corpus(data_cfg.get_string("corpus", "ptb"));
  const data::Corpus corpus = data::Corpus::load(corpus_dir, run.vocab);
  const Tensor batches = data::batchify(split == "valid" ? corpus.valid : corpus.test, batch_size);

  // The cache: from a file (checked against the loaded weights), or computed here for --compare.
  models::TokenInput* input = opts.has("cache") || opts.has("compare") ? &run.token_input() : nullptr;
  Tensor cache;
  std::string cache_label;
  if (opts.has("cache")) {
    const std::string path = opts.get("cache");
    models::TokenCacheFile file = models::load_token_cache(path);
    models::check_cache_matches(file, *input, path);
    cache = file.table;
    cache_label = path;
  } else if (opts.has("compare")) {
    if (!input->has_unit())
      fail(kOp, "--compare needs a model whose input has a unit to cache; this run's input type is '{}'",
           models::to_string(input->config().kind));
    cache = input->compute_cache();
    cache_label = "computed in memory";
  }

  const bool json = opts.has("json");
  if (!json)
    fmt::print(
        "{} ({}): {} split of {}, batch size {}, bptt {}{}{}\n", run.dir, run.checkpoint, split, corpus_dir, batch_size,
        bptt,
        context > 0 ? fmt::format(", context window {} (stride {}, no state carried)", context, bptt - context) : "",
        cache.defined() ? ", cache " + cache_label : "");
  std::optional<Measurement> with_unit;
  if (!cache.defined() || opts.has("compare")) {
    with_unit = measure(*run.model, batches, bptt, context);
    report("unit", *with_unit, json);
  }
  if (cache.defined()) {
    input->use_cache(cache);
    const Measurement with_cache = measure(*run.model, batches, bptt, context);
    input->use_cache({});
    report("cache", with_cache, json);
    if (with_unit) {
      const double ppl_unit = std::exp(with_unit->loss), ppl_cache = std::exp(with_cache.loss);
      const double rel = std::abs(ppl_cache - ppl_unit) / ppl_unit;
      if (!json)
        fmt::print("cache vs unit: perplexity relative difference {:.2e}, {:.2f}x the unit's speed\n", rel,
                   with_unit->seconds / std::max(with_cache.seconds, 1e-9));
      if (!(rel <= kCompareTolerance))
        fail(kOp, "the cache's perplexity {:.6f} differs from the unit's {:.6f} by {:.2e} relative (more than {:.0e}): "
             "the cache does not represent these weights",
             ppl_cache, ppl_unit, rel, kCompareTolerance);
    }
  }
  return 0;
}

}  // namespace define::cli
