// `define memory --config FILE [--ranks N] [--gpu-gib G] ...`: the device memory a training run of
// the config needs per rank (train/memory_plan.h), and when it does not fit a card of G GiB, the
// train.update_freq / model.recompute setting that makes it fit.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/memory_plan.h"
#include "train/nmt_trainer.h"

namespace define::cli {
namespace {

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void print_plan(const train::MemoryPlan& p, const std::string& measured_on) {
  fmt::print("  one pass: {}; train.update_freq {}, model.recompute {}\n", p.pass, p.update_freq,
             p.recompute ? "on" : "off");
  fmt::print("  weights          {:9.1f} MiB\n", mib(p.weights));
  fmt::print("  optimizer state  {:9.1f} MiB ({})\n", mib(p.optimizer_state), p.optimizer);
  if (p.buckets) fmt::print("  reducer buckets  {:9.1f} MiB\n", mib(p.buckets));
  fmt::print("  step             {:9.1f} MiB measured on {}: activations, gradients ({:.1f} MiB), workspace\n",
             mib(p.step), measured_on, mib(p.gradients));
  fmt::print("  peak active      {:9.1f} MiB (weights + step + optimizer state + buckets)\n", mib(p.peak_active()));
  if (p.reserved)
    fmt::print("  reserved         {:9.1f} MiB (the emulated GPU's caching allocator)\n", mib(p.reserved));
  fmt::print(
      "  on a GPU         {:9.1f} MiB (reserved, optimizer state, buckets, + {:.0f} MiB CUDA context allowance)\n",
      mib(train::predicted_device_bytes(p)), mib(train::kContextAllowance));
}

// The config's text with `assignments` applied, as a config of its own.
Config with(const Config& cfg, const std::vector<std::string>& assignments) {
  Config c = Config::from_text(cfg.resolved(), cfg.source());
  for (const std::string& a : assignments) c.set(a);
  return c;
}

}  // namespace

int run_memory(const std::vector<std::string>& args) {
  const Options opts = parse_options("memory", args,
                                     {.required = {"config"},
                                      .repeated = {"set"},
                                      .optional = {"ranks", "vocab-size", "gpu-gib", "sentence-length", "device"},
                                      .flags = {"full"}});
  if (opts.help) {
    fmt::print(
        "usage: define memory --config FILE [--set key=value ...] [--ranks N] [--gpu-gib G]\n"
        "                     [--vocab-size V] [--sentence-length L] [--device emu|cpu] [--full]\n"
        "Predicts the peak device memory a rank of a training run of FILE needs: the weights, the\n"
        "optimizer state and (with N > 1 ranks) the gradient reducer's buckets, counted, and one\n"
        "training step's activations and gradients at the config's per-rank batch, measured by running\n"
        "the step's GPU code on the emulated GPU as a dry run (kernels checked, not run: seconds even for\n"
        "paper-sized models; --full runs them; --device cpu measures the CPU code instead). A GPU adds\n"
        "the CUDA context (an allowance of 512 MiB). When the run does not fit a card of\n"
        "G GiB (default 11: a GTX 1080 Ti or RTX 2080 Ti), the smallest train.update_freq (and\n"
        "model.recompute, for Transformers) that fits is searched and printed. Translation batches are\n"
        "data.max_tokens in sentences of L tokens (default 30).\n");
    return 0;
  }
  const Config cfg = load_config(opts);
  train::MemoryPlanOptions o;
  o.ranks = opts.has("ranks") ? static_cast<int>(opts.get_int("ranks")) : 1;
  o.vocab = opts.has("vocab-size") ? opts.get_int("vocab-size") : 0;
  o.sentence_length = opts.has("sentence-length") ? opts.get_int("sentence-length") : o.sentence_length;
  o.device = opts.has("device") ? Device::parse(opts.get("device")) : Device::emu(0);
  o.dry_run = !opts.has("full");
  const std::string measured_on =
      o.device.str() + (o.device.is_emu() ? (o.dry_run ? " (dry run)" : " (kernels run)") : std::string());
  const double gib = opts.has("gpu-gib") ? std::stod(opts.get("gpu-gib")) : 11.0;
  if (!(gib > 0)) fail("memory", "--gpu-gib must be positive, got {}", gib);
  const auto capacity = static_cast<std::size_t>(gib * (1 << 30));

  const train::MemoryPlan plan = train::plan_memory(cfg, o);
  fmt::print("{} ({}, {:.2f} M parameters), {} rank(s), float32\n", opts.get("config"), plan.model_type,
             static_cast<double>(plan.parameters) / 1e6, o.ranks);
  print_plan(plan, measured_on);
  const bool fits = train::predicted_device_bytes(plan) <= capacity;
  fmt::print("  fits in {:g} GiB: {}\n", gib, fits ? "yes" : "no");
  if (fits) return 0;

  // The settings that trade activation memory for time, cheapest first: more chunks (language
  // models: the streams split into more chunks; translation: batches of a k-th of data.max_tokens,
  // k times as many a step), then recomputation (a second forward pass), then both.
  const bool transformer = plan.model_type == "transformer_xl" || plan.model_type == "transformer_nmt";
  const bool translation = train::is_translation_config(cfg);
  const std::int64_t max_tokens = cfg.section("data").get_int("max_tokens", 4096);
  auto chunks = [&](std::int64_t k) {
    std::vector<std::string> t{fmt::format("train.update_freq={}", plan.update_freq * k)};
    if (translation) t.push_back(fmt::format("data.max_tokens={}", max_tokens / k));
    return t;
  };
  std::vector<std::vector<std::string>> tries;
  for (std::int64_t k = 2; k <= 16; k *= 2) tries.push_back(chunks(k));
  if (transformer && !plan.recompute)
    for (std::int64_t k = 1; k <= 16; k *= 2) {
      std::vector<std::string> t = k == 1 ? std::vector<std::string>{} : chunks(k);
      t.insert(t.begin(), "model.recompute=true");
      tries.push_back(t);
    }
  for (const auto& t : tries) {
    std::optional<train::MemoryPlan> p;
    try {
      p = train::plan_memory(with(cfg, t), o);
    } catch (const Error& e) {
      // A chunk count that does not divide the streams is skipped; anything else is reported.
      if (std::string(e.what()).find("does not split into") == std::string::npos) throw;
      continue;
    }
    if (train::predicted_device_bytes(*p) > capacity) continue;
    fmt::print("fits in {:g} GiB with --set {}:\n", gib, fmt::join(t, " --set "));
    print_plan(*p, measured_on);
    return 0;
  }
  fmt::print("no setting tried fits in {:g} GiB (up to 16 times the chunks{}): use more ranks or a larger card\n", gib,
             transformer ? ", with and without recompute" : "");
  return 0;
}

}  // namespace define::cli
