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
#include "nn/optim/adam.h"
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

}  // namespace

TEST_CASE("memory plan: a dry run on the emulated GPU allocates exactly what the full run does", "[train][memory]") {
  REQUIRE(kernels::register_devices().emu_devices >= 1);
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
  REQUIRE(kernels::register_devices().emu_devices >= 1);
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
  REQUIRE(kernels::register_devices().emu_devices >= 1);
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
