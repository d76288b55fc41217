// The memory plan (train/memory_plan.h): a dry run on the emulated GPU allocates exactly what the
// full run does, and the plan's prediction matches the caching allocator's reserved bytes after
// real training steps (forward, backward, Adam) on the emulated GPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "autograd/ops.h"
#include "core/config.h"
#include "core/factory.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "models/language_model.h"
#include "models/registry.h"
#include "models/translation_model.h"
#include "nn/optim/adam.h"
#include "support/common.h"
#include "train/memory_plan.h"

using namespace define;

namespace {

// Without adaptive bands: which bands a batch reaches depends on its tokens, and the plan draws
// Zipf-like tokens (kTxlAdaptive has bands, for the dry run's equality).
const char* kTxl = R"({"data": {"batch_size": 8, "bptt": 32},
  "model": {"type": "transformer_xl", "vocab_size": 2000, "input": {"type": "projected", "dim": 128},
            "d_model": 128, "n_head": 4, "d_head": 32, "d_inner": 512, "n_layer": 3, "dropout": 0.1, "mem_len": 32},
  "train": {"optimizer": "adam", "seed": 3}})";
const char* kTxlAdaptive = R"({"data": {"batch_size": 4, "bptt": 16},
  "model": {"type": "transformer_xl", "vocab_size": 600, "input": {"type": "projected", "dim": 64, "cutoffs": [100]},
            "d_model": 64, "n_head": 4, "d_head": 16, "d_inner": 128, "n_layer": 2, "dropout": 0.1, "mem_len": 16},
  "train": {"optimizer": "adam", "seed": 3}})";
const char* kNmt = R"({"data": {"source": "de", "target": "en", "max_tokens": 256, "subword": {"vocab_size": 300}},
  "model": {"type": "transformer_nmt", "vocab_size": 300, "input": {"type": "embedding", "dim": 32, "scale": true},
            "d_model": 32, "heads": 4, "ffn_dim": 64, "encoder_layers": 2, "decoder_layers": 2},
  "train": {"optimizer": "adam", "seed": 3}})";

Config parse(const char* json) { return Config::from_text(json, "test"); }

// The plan reads the emulated GPU's caching allocator, which DEFINE_CUDA_CACHE=0 (the asan preset) turns
// off; ctest runs these tests again with it on ("memory plans and recompute with the caching allocator on").
#define REQUIRE_EMULATED_CACHING_ALLOCATOR()                                                        \
  do {                                                                                             \
    REQUIRE(kernels::register_devices().emu_devices >= 1);                                          \
    if (!define::cuda_emu::caching_allocator_enabled())                                            \
      DEFINE_SKIP_TEST("reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off"); \
  } while (false)

}  // namespace

TEST_CASE("memory plan: a dry run on the emulated GPU allocates exactly what the full run does", "[train][memory]") {
  REQUIRE_EMULATED_CACHING_ALLOCATOR();
  for (const char* json : {kTxlAdaptive, kNmt}) {
    for (const bool recompute : {false, true}) {
      Config cfg = parse(json);
      if (recompute) cfg.set("model.recompute=true");
      cfg.set("train.update_freq=2");  // two passes into the same gradients
      CAPTURE(json, recompute);
      train::MemoryPlanOptions o;
      o.sentence_length = 16;
      o.dry_run = true;
      const train::MemoryPlan dry = train::plan_memory(cfg, o);
      o.dry_run = false;
      const train::MemoryPlan full = train::plan_memory(cfg, o);
      CHECK(dry.step == full.step);
      CHECK(dry.reserved == full.reserved);
      CHECK(dry.step > dry.gradients);  // activations on top of the gradients
    }
  }
}

TEST_CASE("memory plan: recompute and update_freq shrink the measured step", "[train][memory]") {
  REQUIRE_EMULATED_CACHING_ALLOCATOR();
  auto step = [](const std::string& set) {
    Config cfg = parse(kTxl);
    if (!set.empty()) cfg.set(set);
    return train::plan_memory(cfg, {}).step;
  };
  const std::size_t plain = step(""), chunked = step("train.update_freq=2"), recomputed = step("model.recompute=true");
  INFO("step bytes: plain " << plain << ", update_freq 2 " << chunked << ", recompute " << recomputed);
  CHECK(chunked < plain);
  CHECK(recomputed < plain);
  // Bad settings are errors that name them.
  Config odd = parse(kTxl);
  odd.set("train.update_freq=3");
  CHECK_THROWS_WITH(train::plan_memory(odd, {}),
                    Catch::Contains("does not split into 1 rank(s) x train.update_freq 3"));
  train::MemoryPlanOptions three;
  three.ranks = 3;
  CHECK_THROWS_WITH(train::plan_memory(parse(kTxl), three), Catch::Contains("data.batch_size 8 does not split"));
}

TEST_CASE("memory plan: the prediction matches training steps measured on the emulated GPU", "[train][memory]") {
  REQUIRE_EMULATED_CACHING_ALLOCATOR();
  const Config cfg = parse(kTxl);
  const train::MemoryPlan plan = train::plan_memory(cfg, {});
  const std::size_t predicted = train::predicted_device_bytes(plan) - train::kContextAllowance;
  CHECK(plan.optimizer_state == 2 * plan.weights);

  // Three real steps: forward from the carried memory, backward, Adam (its state at the first step).
  auto& alloc = define::cuda_emu::allocator(0);
  alloc.empty_cache();
  const std::size_t reserved_before = alloc.stats().reserved_bytes;
  {
    Generator gen(3);
    const models::BuiltModel built = models::build_model(cfg.section("model"), 2000, gen);
    auto lm = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
    lm->to(Device::emu(0));
    lm->train();
    optim::Adam adam(lm->parameters());
    Generator g(1);
    const Tensor tokens = to_device(rand_int({33, 8}, 2000, {.dtype = DType::Int64}, g), Device::emu(0));
    const Tensor x = contiguous(narrow(tokens, 0, 0, 32)), y = contiguous(narrow(tokens, 0, 1, 32));
    models::LmState state;
    for (int s = 0; s < 3; ++s) {
      adam.zero_grad();
      auto out = lm->forward(x, y, state);
      backward(out.objective);
      adam.step();
      state = models::detach(out.state);
    }
  }
  const std::size_t measured = alloc.stats().reserved_bytes - reserved_before;
  INFO("predicted " << predicted << " bytes, measured " << measured);
  // The plan measures one pass from a full memory; the steps add the optimizer's transients.
  CHECK(static_cast<double>(predicted) >= 0.9 * static_cast<double>(measured));
  CHECK(static_cast<double>(predicted) <= 1.1 * static_cast<double>(measured));
}

namespace {

// The caching allocator's reserved bytes after `steps` real training steps (forward, backward,
// Adam) of `cfg`'s model on the emulated GPU, on the batches a plan uses.
std::size_t measured_steps(const Config& cfg, std::int64_t vocab, int steps, std::int64_t sentence_length) {
  auto& alloc = define::cuda_emu::allocator(0);
  alloc.empty_cache();
  const std::size_t before = alloc.stats().reserved_bytes;
  {
    Generator gen(3);
    const models::BuiltModel built = models::build_model(cfg.section("model"), vocab, gen);
    built.module->to(Device::emu(0));
    built.module->train();
    optim::Adam adam(built.module->parameters());
    if (auto nmt = std::dynamic_pointer_cast<models::TranslationModel>(built.module)) {
      const std::int64_t L = sentence_length, B = cfg.section("data").get_int("max_tokens") / L;
      const Tensor src = to_device(train::zipf_tokens({L, B}, vocab, 4, 1), Device::emu(0));
      const Tensor tgt = to_device(train::zipf_tokens({L + 1, B}, vocab, 4, 2), Device::emu(0));
      const Tensor tgt_in = contiguous(narrow(tgt, 0, 0, L)), tgt_out = contiguous(narrow(tgt, 0, 1, L));
      for (int s = 0; s < steps; ++s) {
        adam.zero_grad();
        backward(mul(nmt->loss_sum(src, tgt_in, tgt_out, 0.1), 1.0 / static_cast<double>(B * L)));
        adam.step();
      }
    } else {
      auto lm = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
      const std::int64_t T = cfg.section("data").get_int("bptt"), B = cfg.section("data").get_int("batch_size");
      const Tensor tokens = to_device(train::zipf_tokens({T + 1, B}, vocab, 0, 1), Device::emu(0));
      const Tensor x = contiguous(narrow(tokens, 0, 0, T)), y = contiguous(narrow(tokens, 0, 1, T));
      models::LmState state;
      for (int s = 0; s < steps; ++s) {
        adam.zero_grad();
        auto out = lm->forward(x, y, state);
        backward(out.objective);
        adam.step();
        state = models::detach(out.state);
      }
    }
  }
  return alloc.stats().reserved_bytes - before;
}

}  // namespace

// Minutes: the shipped WikiText-2 and Multi30k configs, kernels run (docs/data-parallel.md gives the
// figures). Run with: define_tests "[.memory-configs]" -s
TEST_CASE("memory plan: the shipped WikiText-2 and Multi30k configs against real steps", "[.memory-configs]") {
  REQUIRE_EMULATED_CACHING_ALLOCATOR();
  for (const char* name : {"wt2-transformer-xl-define.json", "multi30k-transformer.json"}) {
    Config cfg = Config::from_file(std::string(DEFINE_SOURCE_DIR) + "/configs/" + name);
    const bool nmt = std::string(name).find("multi30k") != std::string::npos;
    const std::int64_t vocab = nmt ? 8000 : 33278;  // the subword model's size, WikiText-2's vocabulary
    train::MemoryPlanOptions o;
    o.vocab = vocab;
    const train::MemoryPlan plan = train::plan_memory(cfg, o);
    const std::size_t predicted = train::predicted_device_bytes(plan) - train::kContextAllowance;
    const std::size_t measured = measured_steps(cfg, vocab, 2, o.sentence_length);
    UNSCOPED_INFO(name << ": predicted " << predicted << " bytes, measured after 2 steps " << measured);
    CHECK(static_cast<double>(predicted) >= 0.9 * static_cast<double>(measured));
    CHECK(static_cast<double>(predicted) <= 1.1 * static_cast<double>(measured));
  }
}
