// Epoch checkpoints (train.keep_epoch_checkpoints) and `define average` (tools/average.cpp): a run
// keeps exactly the last N epochs' weights, the average equals the mean computed here tensor by
// tensor, eval reads it, and mismatched checkpoints are refused naming both files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/runs.h"
#include "core/config.h"
#include "nn/checkpoint.h"
#include "support/common.h"
#include "tools/command.h"
#include "train/lm_trainer.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string config_text(const fs::path& data, int dim) {
  return R"({"data": {"dir": ")" + data.string() + R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 2,
              "bptt": 8, "variable_length": false},
    "model": {"type": "lstm_lm", "input": {"type": "embedding", "dim": )" + std::to_string(dim) +
         R"(}, "hidden": 7, "layers": 1},
    "train": {"optimizer": "adam", "lr": 0.01, "epochs": 4, "keep_epoch_checkpoints": 2, "log_interval": 5,
              "threads": 1}})";
}

}  // namespace

TEST_CASE("average: the last N epoch checkpoints, kept and averaged", "[cli][average]") {
  const fs::path root = test::fresh_root("define_average_test", 77, 60, 20);
  Config cfg = Config::from_text(config_text(root / "data", 6), "<test>");
  train::train_language_model(cfg, (root / "run").string(), false);
  CHECK(!fs::exists(root / "run" / "epoch1.ckpt"));
  CHECK(!fs::exists(root / "run" / "epoch2.ckpt"));
  REQUIRE(fs::exists(root / "run" / "epoch3.ckpt"));
  REQUIRE(fs::exists(root / "run" / "epoch4.ckpt"));

  REQUIRE(cli::run_average({"--run", (root / "run").string(), "--last", "5"}) == 0);
  const nn::Checkpoint avg = nn::load_checkpoint((root / "run" / "averaged.ckpt").string());
  const nn::Checkpoint a = nn::load_checkpoint((root / "run" / "epoch3.ckpt").string());
  const nn::Checkpoint b = nn::load_checkpoint((root / "run" / "epoch4.ckpt").string());
  CHECK(avg.run.at("averaged_from") == "epoch3.ckpt epoch4.ckpt");
  CHECK(avg.run.at("vocab") == a.run.at("vocab"));
  REQUIRE(avg.model.size() == a.model.size());
  for (const auto& [name, t] : avg.model) {
    INFO(name);
    const auto x = test::values(*a.model.find(name)), y = test::values(*b.model.find(name)), m = test::values(t);
    REQUIRE(m.size() == x.size());
    for (std::size_t i = 0; i < m.size(); ++i) CHECK(m[i] == Approx((x[i] + y[i]) / 2).epsilon(1e-6));
  }
  // eval reads it like any checkpoint.
  CHECK(cli::run_eval({"--run", (root / "run").string(), "--checkpoint", (root / "run" / "averaged.ckpt").string()}) == 0);

  SECTION("mismatched checkpoints are refused naming both") {
    Config other = Config::from_text(config_text(root / "data", 5), "<test>");
    train::train_language_model(other, (root / "other").string(), false);
    const std::string p = (root / "run" / "epoch4.ckpt").string(), q = (root / "other" / "epoch4.ckpt").string();
    CHECK_THROWS_WITH(cli::average_checkpoints({p, q}), Contains("'" + p + "'") && Contains("'" + q + "'"));
  }
  SECTION("a run without epoch checkpoints") {
    fs::create_directories(root / "empty");
    CHECK_THROWS_WITH(cli::run_average({"--run", (root / "empty").string()}),
                      Contains("kept no epoch checkpoints") && Contains("train.keep_epoch_checkpoints"));
    CHECK_THROWS_WITH(cli::run_average({"--run", (root / "run").string(), "--last", "0"}), Contains("--last must be positive"));
  }
}
