// `define train` on the Transformer language models through the model-agnostic training loop
// (train/training_loop.h): Transformer-XL resumes exactly with a non-empty memory in the
// checkpoint, the DeLighT LM trains through the same loop, the learning-rate schedules give the
// rates their formulas give, a longer evaluation memory is a run-time option, and config errors
// name the key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/attention.h"
#include "core/config.h"
#include "core/error.h"
#include "cuda_emu/emu_profile.hpp"
#include "models/registry.h"
#include "nn/checkpoint.h"
#include "support/emulated_device.h"
#include "support/runs.h"
#include "train/lm_trainer.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

fs::path fresh_root(const std::string& name) { return test::fresh_root(name, 777, 300, 30); }

const std::string kTxlModel = R"({"type": "transformer_xl", "input": {"type": "projected", "dim": 8, "out_dim": 12,
    "cutoffs": [10]}, "d_model": 12, "n_head": 2, "d_head": 6, "d_inner": 16, "n_layer": 2, "dropout": 0.1,
    "dropatt": 0.1, "mem_len": 6, "same_length": true, "clamp_len": 10})";
const std::string kDelightModel = R"({"type": "delight_lm", "padding_idx": -1, "map_dim": 8, "d_m": 16,
    "emb_depth": 2, "min_depth": 2, "max_depth": 3, "layers": 2, "adaptive": false, "max_groups": 2,
    "dropout": {"residual": 0.1}})";

std::string config_text(const fs::path& data, int max_steps, const std::string& model,
                        const std::string& train_extra = R"(, "schedule": "cosine", "warmup_steps": 3)") {
  return R"({"data": {"dir": ")" + data.string() +
         R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 2, "bptt": 6, "variable_length": false},
    "model": )" + model + R"(,
    "train": {"optimizer": "adam", "lr": 0.003, "adam_beta2": 0.98, "weight_decay": 0, "max_steps": )" +
         std::to_string(max_steps) + R"(, "log_interval": 1, "checkpoint_interval": 3, "threads": 1)" + train_extra +
         "}}";
}

// (step, loss, lr) of every train line of a run's metrics.jsonl.
struct Logged {
  double step, loss, lr;
  bool operator==(const Logged&) const = default;
};
double field(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stod(line.substr(at + key.size() + 3));
}
std::vector<Logged> train_log(const fs::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::vector<Logged> out;
  for (std::string line; std::getline(f, line);)
    if (line.find("\"event\":\"train\"") != std::string::npos)
      out.push_back({field(line, "step"), field(line, "loss"), field(line, "lr")});
  return out;
}

// Trains `model` 10 steps in one go and as 5 + 5 (resumed), with one cosine schedule of 10
// steps, and checks both logged the same losses and rates.
void check_exact_resume(const fs::path& root, const std::string& model, const std::string& name) {
  const std::string schedule = R"(, "schedule": "cosine", "warmup_steps": 3, "schedule_steps": 10)";
  Config whole = Config::from_text(config_text(root / "data", 10, model, schedule), "<test>");
  train::train_language_model(whole, (root / (name + "_a")).string(), false);
  Config first = Config::from_text(config_text(root / "data", 5, model, schedule), "<test>");
  train::train_language_model(first, (root / (name + "_b")).string(), false);
  Config rest = Config::from_text(config_text(root / "data", 10, model, schedule), "<test>");
  train::train_language_model(rest, (root / (name + "_b")).string(), true);
  const auto a = train_log(root / (name + "_a")), b = train_log(root / (name + "_b"));
  REQUIRE(a.size() == 10);
  CHECK(a == b);
}

}  // namespace

TEST_CASE("train: Transformer-XL resumes exactly with its memory in the checkpoint", "[cli][train][transformer_xl]") {
  const fs::path root = fresh_root("define_train_txl");
  // After 5 steps the run stops mid-epoch: the checkpoint must hold each layer's memory.
  Config first = Config::from_text(config_text(root / "data", 5, kTxlModel), "<test>");
  train::train_language_model(first, (root / "probe").string(), false);
  const nn::Checkpoint ck = nn::load_checkpoint((root / "probe" / "latest.ckpt").string());
  REQUIRE(ck.run_tensors.size() == 2);
  CHECK(ck.run_tensors.at("mem0").shape() == Shape{6, 4, 12});
  CHECK(ck.run_tensors.at("mem1").shape() == Shape{6, 4, 12});

  check_exact_resume(root, kTxlModel, "txl");
  fs::remove_all(root);
}

TEST_CASE("train: the DeLighT LM trains and resumes through the same loop", "[cli][train][delight]") {
  const fs::path root = fresh_root("define_train_delight");
  check_exact_resume(root, kDelightModel, "delight");
  fs::remove_all(root);
}

TEST_CASE("train: learning-rate schedules give the rates of their formulas", "[cli][train]") {
  const fs::path root = fresh_root("define_train_schedules");
  const double peak = 0.003;
  // Linear warm-up over 3 updates from 0, then half a cosine down to 0 at step 10.
  Config cosine = Config::from_text(config_text(root / "data", 10, kTxlModel), "<test>");
  train::train_language_model(cosine, (root / "cosine").string(), false);
  const auto c = train_log(root / "cosine");
  REQUIRE(c.size() == 10);
  for (int s = 0; s < 10; ++s) {
    const double want = s < 3 ? peak * s / 3 : peak * (1 + std::cos(M_PI * (s - 3) / 7.0)) / 2;
    INFO("update " << s);
    CHECK(c[static_cast<std::size_t>(s)].lr == Approx(want).margin(1e-15));
  }
  // fairseq's inverse_sqrt: warm-up to the peak at step 4, then peak * sqrt(4 / s).
  Config isqrt = Config::from_text(
      config_text(root / "data", 8, kTxlModel, R"(, "schedule": "inverse_sqrt", "warmup_steps": 4)"), "<test>");
  train::train_language_model(isqrt, (root / "isqrt").string(), false);
  const auto r = train_log(root / "isqrt");
  REQUIRE(r.size() == 8);
  for (int s = 0; s < 8; ++s) {
    const double want = s < 4 ? peak * s / 4 : peak * std::sqrt(4.0 / s);
    INFO("update " << s);
    CHECK(r[static_cast<std::size_t>(s)].lr == Approx(want).margin(1e-15));
  }
  fs::remove_all(root);
}

TEST_CASE("eval: Transformer-XL evaluates with a longer memory on request", "[cli][eval][transformer_xl]") {
  const fs::path root = fresh_root("define_eval_txl");
  Config cfg = Config::from_text(config_text(root / "data", 20, kTxlModel), "<test>");
  train::train_language_model(cfg, (root / "run").string(), false);
  const std::string base = std::string(DEFINE_CLI_BINARY) + " eval --run " + (root / "run").string() + " --json --threads 1";
  auto perplexity = [](const std::string& json) {
    const auto at = json.find("\"perplexity\": ");
    REQUIRE(at != std::string::npos);
    return std::stod(json.substr(at + 14));
  };
  const auto [rc_default, out_default] = test::run_command(base);
  const auto [rc_long, out_long] = test::run_command(base + " --mem-len 24");
  REQUIRE(rc_default == 0);
  REQUIRE(rc_long == 0);
  // A different amount of context gives a different (finite) perplexity.
  CHECK(std::isfinite(perplexity(out_long)));
  CHECK(perplexity(out_long) != perplexity(out_default));

  // The LSTM has no memory to lengthen.
  const Config lstm = Config::from_text(
      R"({"model": {"type": "lstm_lm", "vocab_size": 9, "input": {"dim": 4}, "hidden": 5, "layers": 1}})", "<test>");
  const models::BuiltModel built = models::build_model(lstm.section("model"), 0);
  CHECK_THROWS_WITH(dynamic_cast<models::LanguageModel&>(*built.module).set_eval_memory(12),
                    Contains("keeps no memory across windows"));
  fs::remove_all(root);
}

TEST_CASE("train: loop and model config errors name the key", "[cli][train]") {
  const fs::path root = fresh_root("define_train_loop_errors");
  auto train = [&](const std::string& model, const std::string& extra) {
    Config c = Config::from_text(config_text(root / "data", 4, model, extra), "<test>");
    train::train_language_model(c, (root / "run").string(), false);
  };
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "linear")"), Contains("unknown train.schedule 'linear'"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "warmup_steps": 2)"), Contains("train.warmup_steps and train.schedule_steps need train.schedule"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "cosine", "warmup_steps": 4, "max_steps": 4)"),
                    Contains("needs more steps"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "optimizer": "ntasgd", "schedule": "inverse_sqrt")"),
                    Contains("cannot drive ntasgd"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule_over": "clock")"),
                    Contains("train.schedule_over must be 'steps' or 'time', got 'clock'"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "inverse_sqrt", "schedule_over": "time", "max_minutes": 1)"),
                    Contains("train.schedule_over time needs train.schedule cosine"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "cosine", "schedule_over": "time")"),
                    Contains("needs a time budget: set train.max_minutes"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "cosine", "schedule_over": "time", "max_minutes": 1,
                    "schedule_steps": 100)"), Contains("set one of them"));
  // AWD-LSTM's activation regularisers are the LSTM's own keys: unknown to Transformer-XL.
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "alpha": 2)"), Contains("unknown config key 'train.alpha'"));
  CHECK_THROWS_WITH(train(kTxlModel, R"(, "schedule": "cosine", "warmup_steps": -1)"),
                    Contains("train.warmup_steps must be >= 0"));
  fs::remove_all(root);
}

TEST_CASE("train: Transformer-XL trains the same on the emulated GPU", "[cli][train][transformer_xl]") {
  // Every op of the model (relative attention, LayerNorm, GEMMs, the projected adaptive softmax,
  // dropout on the shared Philox stream) runs as CUDA kernels on the emulated device: the same
  // losses as on the CPU, to float32 rounding, and the memory moves with the model.
  const fs::path root = fresh_root("define_train_txl_device");
  const std::string model = R"({"type": "transformer_xl", "input": {"type": "define", "map": "projected", "dim": 8,
      "proj_dim": 12, "out_dim": 12, "cutoffs": [10], "k": 16, "depth": 2, "g_max": 2}, "d_model": 12, "n_head": 2,
      "d_head": 6, "d_inner": 16, "n_layer": 2, "dropout": 0.1, "dropatt": 0.1, "mem_len": 6})";
  Config on_cpu = Config::from_text(config_text(root / "data", 4, model), "<test>");
  const train::TrainResult c = train::train_language_model(on_cpu, (root / "cpu").string(), false);
  Config on_emu = Config::from_text(config_text(root / "data", 4, model), "<test>");
  on_emu.set("train.device=\"emu\"");
  const train::TrainResult e = train::train_language_model(on_emu, (root / "emu").string(), false);
  const auto lc = train_log(root / "cpu"), le = train_log(root / "emu");
  REQUIRE(lc.size() == 4);
  REQUIRE(le.size() == 4);
  for (std::size_t i = 0; i < lc.size(); ++i) {
    INFO("step " << i + 1 << ": cpu " << lc[i].loss << ", emu " << le[i].loss);
    CHECK(std::abs(lc[i].loss - le[i].loss) <= 1e-4 * lc[i].loss);
  }
  CHECK(std::abs(e.valid_loss - c.valid_loss) <= 1e-4 * c.valid_loss);
  const nn::Checkpoint ck = nn::load_checkpoint((root / "emu" / "latest.ckpt").string());
  for (const auto& [name, t] : ck.run_tensors) CHECK(t.device().is_cpu());
  fs::remove_all(root);
}

TEST_CASE("train: Transformer-XL trains the same with fused and unfused attention on the emulated GPU",
          "[cli][train][transformer_xl]") {
  // The fused relative attention (autograd/flash_rel_attention.h: no [B, H, Tq, Tk] tensor) is the
  // default on GPUs; the unfused GEMM + row-kernel path stays selectable. With a memory, a window
  // (same_length) and attention dropout on, both draw the same mask, so every logged loss agrees to
  // float32 rounding.
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kSteps = 10;  // the emulated device under the sanitizers: seconds a step
#else
  constexpr int kSteps = 50;
#endif
  const fs::path root = fresh_root("define_train_txl_fused");
  std::vector<Logged> logs[2];
  for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Unfused}) {
    set_default_attention_kernel(kernel);
    Config cfg = Config::from_text(config_text(root / "data", kSteps, kTxlModel), "<test>");
    cfg.set("train.device=\"emu\"");
    cfg.set("train.checkpoint_interval=1000");
    const std::string name = kernel == AttentionKernel::Fused ? "fused" : "unfused";
    train::train_language_model(cfg, (root / name).string(), false);
    logs[kernel == AttentionKernel::Fused ? 0 : 1] = train_log(root / name);
  }
  set_default_attention_kernel(AttentionKernel::Auto);
  REQUIRE(logs[0].size() == static_cast<std::size_t>(kSteps));
  REQUIRE(logs[1].size() == static_cast<std::size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    const double f = logs[0][static_cast<std::size_t>(i)].loss, u = logs[1][static_cast<std::size_t>(i)].loss;
    INFO("step " << i + 1 << ": fused " << f << ", unfused " << u);
    CHECK(std::abs(f - u) <= 1e-4 * std::abs(u));
  }
  fs::remove_all(root);
}

TEST_CASE("train: Transformer-XL in bf16 trains the same with tensor-core and unfused attention on the emulated GPU",
          "[cli][train][transformer_xl]") {
  // Mixed precision on an emulated sm_80: the fused relative attention takes its six inputs in
  // bfloat16 and runs on tensor cores (kernels/cuda/flash_rel_attention_mma.cu), the unfused path
  // takes the same 16-bit inputs through its GEMMs. They round at different places (P and dS against
  // the unfused scores), so the losses agree to bfloat16's precision rather than float32's.
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kSteps = 10;  // the emulated device under the sanitizers: seconds a step
#else
  constexpr int kSteps = 50;
#endif
  const test::EmuDeviceScope ampere({.arch = 80});
  const fs::path root = fresh_root("define_train_txl_bf16_fused");
  std::vector<Logged> logs[2];
  for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Unfused}) {
    set_default_attention_kernel(kernel);
    Config cfg = Config::from_text(config_text(root / "data", kSteps, kTxlModel), "<test>");
    cfg.set("train.device=\"emu\"");
    cfg.set("train.precision=\"bf16\"");
    cfg.set("train.checkpoint_interval=1000");
    const std::string name = kernel == AttentionKernel::Fused ? "fused" : "unfused";
    train::train_language_model(cfg, (root / name).string(), false);
    logs[kernel == AttentionKernel::Fused ? 0 : 1] = train_log(root / name);
  }
#if !defined(__SANITIZE_ADDRESS__)
  // Which kernels a fused step runs (one step: the profile slows the emulator a hundredfold): the
  // tensor-core forward and its three backward kernels, once a layer.
  {
    set_default_attention_kernel(AttentionKernel::Fused);
    Config cfg = Config::from_text(config_text(root / "data", 1, kTxlModel), "<test>");
    cfg.set("train.device=\"emu\"");
    cfg.set("train.precision=\"bf16\"");
    cfg.set("train.warmup_steps=0");
    cfg.set("data.eval_batch_size=64");  // few evaluation launches
    cfg.set("data.test_batch_size=64");
    ::cuda_emu::profile_start();
    train::train_language_model(cfg, (root / "profiled").string(), false);
    int forward = 0, backward = 0;
    for (const ::cuda_emu::KernelProfile& k : ::cuda_emu::profile_stop()) {
      forward += k.kernel.find("rel_forward_mma_kernel") != std::string::npos;
      for (const char* name : {"rel_backward_kv_mma_kernel", "rel_backward_q_mma_kernel", "rel_backward_r_mma_kernel"})
        backward += k.kernel.find(name) != std::string::npos;
    }
    // 2 layers: the step's forward and backward; the validation and test passes add forwards.
    CHECK(backward == 3 * 2);
    CHECK(forward >= 2);
    fs::remove_all(root / "profiled");
  }
#endif
  set_default_attention_kernel(AttentionKernel::Auto);
  REQUIRE(logs[0].size() == static_cast<std::size_t>(kSteps));
  REQUIRE(logs[1].size() == static_cast<std::size_t>(kSteps));
  double largest = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double f = logs[0][static_cast<std::size_t>(i)].loss, u = logs[1][static_cast<std::size_t>(i)].loss;
    INFO("step " << i + 1 << ": tensor cores " << f << ", unfused " << u);
    CHECK(std::abs(f - u) <= 0.01 * std::abs(u));
    largest = std::max(largest, std::abs(f - u) / std::abs(u));
  }
  fmt::print(
      "Transformer-XL in bf16 on the emulated sm_80, tensor-core against unfused attention: losses within "
      "{:.3f}% over {} steps\n",
      100 * largest, kSteps);
  fs::remove_all(root);
}
