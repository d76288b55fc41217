// Translation end to end (train/nmt_trainer.h, tools/translate.cpp): `define train` on a small
// generated parallel corpus (the target is the source's words in reverse order, in capitals), a
// model that learns it well enough for beam search to reproduce most training pairs exactly,
// exact resume, `define translate` line for line (an empty line stays empty, standard input),
// epoch checkpoints averaged, and the errors a user can make named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/attention.h"
#include "core/config.h"
#include "nn/checkpoint.h"
#include "support/common.h"
#include "support/runs.h"
#include "tools/command.h"
#include "train/nmt_trainer.h"

using namespace define;
using Catch::Contains;
using define::test::fresh_parallel_root;
using define::test::read_all;
using define::test::reversed_in_capitals;
namespace fs = std::filesystem;

namespace {

std::string config_text(const fs::path& data, int max_steps, const std::string& extra_train = "") {
  return R"({"data": {"dir": ")" + data.string() + R"(", "source": "src", "target": "tgt", "max_tokens": 256,
              "subword": {"vocab_size": 60}},
    "model": {"type": "transformer_nmt", "input": {"type": "embedding", "dim": 48, "scale": true},
              "d_model": 48, "heads": 4, "ffn_dim": 96, "encoder_layers": 2, "decoder_layers": 2, "pre_norm": true,
              "dropout": {"residual": 0.1}},
    "train": {"optimizer": "adam", "lr": 0.003, "adam_beta2": 0.98, "schedule": "inverse_sqrt", "warmup_steps": 50,
              "clip": 1.0, "epochs": 1000, "max_steps": )" +
         std::to_string(max_steps) + R"(, "checkpoint_interval": 100, "threads": 1)" + extra_train + "}}";
}

std::vector<std::string> lines_of(const fs::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("translate: train, translate, resume exactly", "[cli][translate]") {
  const fs::path root = fresh_parallel_root("define_translate_test");
  Config cfg = Config::from_text(
      config_text(root / "data", 800, R"(, "keep_epoch_checkpoints": 2, "log_interval": 50)"), "<test>");
  const train::TrainResult r = train::train_translation_model(cfg, (root / "run").string(), false);
  CHECK(r.steps == 800);
  for (const char* f : {"config.json", "subword.model", "subword.vocab", "latest.ckpt", "best.ckpt", "metrics.jsonl"})
    CHECK(fs::exists(root / "run" / f));
  CHECK(std::exp(r.valid_loss) < 1.3);  // from about 60 (the subword vocabulary) at the start

  // Translate the test sources: most come out exactly right.
  const fs::path input = root / "input.txt", output = root / "output.txt";
  std::vector<std::string> src = lines_of(root / "data" / "test.src");
  src.insert(src.begin() + 3, "");  // an empty line gives an empty line
  {
    std::ofstream f(input);
    for (const auto& l : src) f << l << '\n';
  }
  REQUIRE(cli::run_translate({"--run", (root / "run").string(), "--input", input.string(), "--output", output.string(),
                              "--beam", "4", "--max-len-a", "2", "--max-len-b", "4"}) == 0);
  const std::vector<std::string> out = lines_of(output);
  REQUIRE(out.size() == src.size());
  CHECK(out[3].empty());
  int exact = 0;
  for (std::size_t i = 0; i < src.size(); ++i)
    if (!src[i].empty()) exact += out[i] == reversed_in_capitals(src[i]);
  INFO("first translation: '" << out[0] << "' for '" << src[0] << "'");
  CHECK(exact >= 30);  // of 40

  // Standard input, greedy.
  const auto [status, text] =
      test::run_command("printf 'ka tor\\n' | " + std::string(DEFINE_CLI_BINARY) + " translate --run " +
                        (root / "run").string() + " --beam 1 2>/dev/null");
  CHECK(status == 0);
  CHECK(text == "TOR KA\n");

  // Epoch checkpoints: the last two kept, their average translates too.
  REQUIRE(cli::run_average({"--run", (root / "run").string(), "--last", "2"}) == 0);
  REQUIRE(cli::run_translate({"--run", (root / "run").string(), "--input", input.string(), "--output", output.string(),
                              "--checkpoint", (root / "run" / "averaged.ckpt").string()}) == 0);
  CHECK(lines_of(output).size() == src.size());
}

TEST_CASE("translate: a resumed run equals an uninterrupted one", "[cli][translate]") {
  const fs::path root = fresh_parallel_root("define_translate_resume_test");
  Config whole =
      Config::from_text(config_text(root / "data", 60, R"(, "update_freq": 2, "log_interval": 5)"), "<test>");
  train::train_translation_model(whole, (root / "a").string(), false);
  Config first =
      Config::from_text(config_text(root / "data", 35, R"(, "update_freq": 2, "log_interval": 5)"), "<test>");
  train::train_translation_model(first, (root / "b").string(), false);
  Config again =
      Config::from_text(config_text(root / "data", 60, R"(, "update_freq": 2, "log_interval": 5)"), "<test>");
  train::train_translation_model(again, (root / "b").string(), true);
  CHECK(test::logged_without_clock(root / "a") == test::logged_without_clock(root / "b"));
  const nn::Checkpoint a = nn::load_checkpoint((root / "a" / "latest.ckpt").string());
  const nn::Checkpoint b = nn::load_checkpoint((root / "b" / "latest.ckpt").string());
  for (const auto& [name, t] : a.model) {
    INFO(name);
    CHECK(test::values(t) == test::values(*b.model.find(name)));
  }
}

TEST_CASE("translate: errors name the file, the line or the key", "[cli][translate]") {
  const fs::path root = fresh_parallel_root("define_translate_errors_test");
  SECTION("misaligned files") {
    std::ofstream(root / "data" / "val.tgt", std::ios::app) << "EXTRA LINE\n";
    Config cfg = Config::from_text(config_text(root / "data", 2), "<test>");
    CHECK_THROWS_WITH(
        train::train_translation_model(cfg, (root / "run").string(), false),
        Contains("val.src") && Contains("val.tgt") && Contains("not line-aligned") && Contains("after line 40"));
  }
  SECTION("an empty file") {
    std::ofstream(root / "data" / "test.src", std::ios::trunc);
    Config cfg = Config::from_text(config_text(root / "data", 2), "<test>");
    CHECK_THROWS_WITH(train::train_translation_model(cfg, (root / "run").string(), false), Contains("test.src"));
  }
  SECTION("padding id and the subword model's disagree") {
    std::string text = config_text(root / "data", 2);
    text.replace(text.find("\"d_model\""), 0, "\"padding_idx\": 1, ");
    Config cfg = Config::from_text(text, "<test>");
    CHECK_THROWS_WITH(train::train_translation_model(cfg, (root / "run").string(), false),
                      Contains("model.padding_idx = 1 but the subword model pads with id 0"));
  }
  SECTION("bad options and files") {
    Config cfg = Config::from_text(config_text(root / "data", 2), "<test>");
    train::train_translation_model(cfg, (root / "run").string(), false);
    CHECK_THROWS_WITH(
        cli::run_translate({"--run", (root / "run").string(), "--input", (root / "missing.txt").string()}),
        Contains("missing.txt"));
    CHECK_THROWS_WITH(cli::run_translate({"--run", (root / "run").string(), "--beam", "0"}),
                      Contains("beam must be >= 1"));
    // A subword model replaced after training.
    fs::copy_file(root / "run" / "subword.model", root / "subword.bak");
    {
      std::string bytes = read_all((root / "run" / "subword.model").string());
      bytes[bytes.size() / 2] ^= 1;
      std::ofstream(root / "run" / "subword.model", std::ios::binary | std::ios::trunc) << bytes;
    }
    CHECK_THROWS_WITH(cli::run_translate({"--run", (root / "run").string()}), Contains("subword.model"));
  }
  SECTION("--init-from takes another run's weights and its subword model") {
    Config cfg = Config::from_text(config_text(root / "data", 2), "<test>");
    train::train_translation_model(cfg, (root / "run").string(), false);
    train::StartOptions start;
    start.init_from = (root / "run").string();
    Config tune = Config::from_text(config_text(root / "data", 1), "<test>");
    tune.set("data.subword.vocab_size=50");  // ignored: the subword model is the run's
    train::train_translation_model(tune, (root / "tuned").string(), start);
    CHECK(read_all((root / "tuned" / "subword.model").string()) == read_all((root / "run" / "subword.model").string()));
    const auto init = test::events(root / "tuned", "init_from");
    REQUIRE(init.size() == 1);
    CHECK(init[0]["tensors_not_found"].get<double>() == 0);
    CHECK(init[0]["tensors_loaded"].get<double>() > 0);
  }
  SECTION("a config mistake is reported before the subword model is trained or any data read") {
    Config cfg = Config::from_text(config_text(root / "nowhere", 2), "<test>");
    cfg.set("model.d_modle=8");
    CHECK_THROWS_WITH(train::train_translation_model(cfg, (root / "run").string(), false),
                      Contains("unknown config key 'model.d_modle'"));
    CHECK_FALSE(fs::exists(root / "run"));
  }
  SECTION("train.update_freq and label_smoothing are checked") {
    Config cfg = Config::from_text(config_text(root / "data", 2, R"(, "update_freq": 0)"), "<test>");
    CHECK_THROWS_WITH(train::train_translation_model(cfg, (root / "run").string(), false),
                      Contains("train.update_freq must be positive"));
    Config ls = Config::from_text(config_text(root / "data", 2, R"(, "label_smoothing": 1)"), "<test>");
    CHECK_THROWS_WITH(train::train_translation_model(ls, (root / "run").string(), false),
                      Contains("train.label_smoothing must be in [0, 1), got 1"));
  }
}

TEST_CASE("translate: training and beam search on the emulated GPU match the CPU", "[cli][translate]") {
  // The emulated device runs the CUDA kernels (GEMMs, attention rows, LayerNorm, dropout on the
  // shared Philox stream, the label-smoothed loss) on the CPU: the same losses to float32 rounding.
  const fs::path root = fresh_parallel_root("define_translate_emu_test");
  Config on_cpu = Config::from_text(config_text(root / "data", 4, R"(, "log_interval": 1)"), "<test>");
  const train::TrainResult c = train::train_translation_model(on_cpu, (root / "cpu").string(), false);
  Config on_emu = Config::from_text(config_text(root / "data", 4, R"(, "log_interval": 1, "device": "emu")"), "<test>");
  const train::TrainResult e = train::train_translation_model(on_emu, (root / "emu").string(), false);
  CHECK(std::abs(e.valid_loss - c.valid_loss) <= 1e-4 * c.valid_loss);
  CHECK(std::abs(e.test_loss - c.test_loss) <= 1e-4 * c.test_loss);
  // Beam search on the emulated device gives the CPU's translations (of 12 sentences: each costs
  // the emulator seconds under the sanitizers).
  const fs::path input = root / "input.txt";
  {
    const std::vector<std::string> val = lines_of(root / "data" / "val.src");
    std::ofstream f(input);
    for (std::size_t i = 0; i < 12; ++i) f << val.at(i) << '\n';
  }
  REQUIRE(cli::run_translate({"--run", (root / "emu").string(), "--input", input.string(), "--output",
                              (root / "emu.txt").string(), "--beam", "3", "--max-len-b", "8"}) == 0);
  REQUIRE(cli::run_translate({"--run", (root / "emu").string(), "--input", input.string(), "--output",
                              (root / "on_emu.txt").string(), "--beam", "3", "--max-len-b", "8", "--device", "emu"}) ==
          0);
  CHECK(lines_of(root / "emu.txt") == lines_of(root / "on_emu.txt"));
  fs::remove_all(root);
}

TEST_CASE("translate: DeLighT NMT trains through the same loop and translates", "[cli][translate]") {
  const fs::path root = fresh_parallel_root("define_translate_delight_test");
  const std::string text = R"({"data": {"dir": ")" + (root / "data").string() +
                           R"(", "source": "src", "target": "tgt", "max_tokens": 256, "subword": {"vocab_size": 60}},
    "model": {"type": "delight_nmt", "padding_idx": 0, "map_dim": 16, "d_m": 32, "emb_depth": 2, "max_groups": 2,
              "encoder": {"min_depth": 2, "max_depth": 3, "layers": 2}, "decoder": {"min_depth": 2, "max_depth": 3, "layers": 2},
              "dropout": {"residual": 0.1}},
    "train": {"optimizer": "adam", "lr": 0.003, "epochs": 10, "max_steps": 40, "log_interval": 10, "threads": 1}})";
  Config cfg = Config::from_text(text, "<test>");
  const train::TrainResult r = train::train_translation_model(cfg, (root / "run").string(), false);
  CHECK(r.steps == 40);
  CHECK(std::exp(r.valid_loss) < 40.0);  // below the uniform guess over the 60 subwords
  REQUIRE(cli::run_translate({"--run", (root / "run").string(), "--input", (root / "data" / "val.src").string(),
                              "--output", (root / "out.txt").string(), "--beam", "2", "--max-len-b", "8"}) == 0);
  CHECK(lines_of(root / "out.txt").size() == 40);
  fs::remove_all(root);
}

TEST_CASE("translate: fused and unfused attention train the same model on the emulated GPU", "[cli][translate]") {
  // The fused kernels (autograd/flash_attention.h: no [B, H, Tq, Tk] tensor) are the default on GPUs;
  // the unfused GEMM + row-kernel path stays selectable. With attention dropout on, both draw the
  // same mask, so every logged loss agrees to float32 rounding, and so do the decoded translations.
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kSteps = 10;  // the emulated device under the sanitizers: seconds a step
#else
  constexpr int kSteps = 50;
#endif
  const fs::path root = fresh_parallel_root("define_translate_fused_test");
  const std::string train_extra = R"(, "log_interval": 1, "device": "emu")";
  std::map<std::string, std::vector<double>> losses;
  for (const auto& [name, kernel] :
       {std::pair{"fused", AttentionKernel::Fused}, std::pair{"unfused", AttentionKernel::Unfused}}) {
    set_default_attention_kernel(kernel);
    Config cfg = Config::from_text(config_text(root / "data", kSteps, train_extra), "<test>");
    cfg.set("model.dropout.attention=0.1");
    // A small model: the emulated device runs every kernel thread by thread.
    for (const char* small : {"model.d_model=16", "model.input.dim=16", "model.heads=2", "model.ffn_dim=32",
                              "model.encoder_layers=1", "model.decoder_layers=1", "data.max_tokens=96"})
      cfg.set(small);
    train::train_translation_model(cfg, (root / name).string(), false);
    for (const auto& e : test::events(root / name, "train")) losses[name].push_back(e["loss"].get<double>());
  }
  set_default_attention_kernel(AttentionKernel::Auto);
  REQUIRE(losses["fused"].size() == static_cast<std::size_t>(kSteps));
  REQUIRE(losses["unfused"].size() == static_cast<std::size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    INFO("step " << i + 1);
    const double f = losses["fused"][static_cast<std::size_t>(i)], u = losses["unfused"][static_cast<std::size_t>(i)];
    CHECK(std::abs(f - u) <= 1e-4 * std::abs(u));
  }
}
