// Same config, seed and thread count: bit-identical training, on the CPU with two threads (OpenMP
// reductions and the fused kernels must not depend on timing) and on the emulated GPU (the CUDA
// kernels' reductions must not depend on block or thread order). Dropout is on everywhere, so the
// random streams are covered too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/runs.h"
#include "core/config.h"
#include "nn/checkpoint.h"
#include "train/lm_trainer.h"

using namespace define;
namespace fs = std::filesystem;

namespace {


const char* const kModels[] = {
    R"({"type": "lstm_lm", "input": {"type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 2, "g_max": 2},
        "hidden": 16, "layers": 2,
        "dropout": {"embedding": 0.1, "input": 0.2, "hidden": 0.2, "output": 0.2, "weight": 0.3}})",
    R"({"type": "transformer_xl", "input": {"type": "projected", "dim": 8, "out_dim": 12, "cutoffs": [10]},
        "d_model": 12, "n_head": 2, "d_head": 6, "d_inner": 16, "n_layer": 2, "dropout": 0.1, "dropatt": 0.1,
        "mem_len": 6, "same_length": true, "clamp_len": 10})",
};

}  // namespace

TEST_CASE("determinism: the same seed and thread count give bit-identical runs on the CPU and the emulated GPU",
          "[cli][determinism]") {
  const fs::path root = test::fresh_root("define_determinism_test", 31, 200, 20);
  for (const char* device : {"cpu", "emu"}) {
    for (const char* model : kModels) {
      const std::string text = R"({"data": {"dir": ")" + (root / "data").string() +
                               R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 2, "bptt": 8},
        "model": )" + std::string(model) + R"(,
        "train": {"optimizer": "adam", "lr": 0.003, "weight_decay": 0, "max_steps": 12, "log_interval": 2,
                  "checkpoint_interval": 6, "threads": 2, "device": ")" + device + R"("}})";
      std::vector<std::string> logs[2];
      nn::Checkpoint ckpts[2];
      for (int r = 0; r < 2; ++r) {
        const fs::path run = root / fmt::format("{}_{}", device, r);
        fs::remove_all(run);
        Config cfg = Config::from_text(text, "<test>");
        train::train_language_model(cfg, run.string(), false);
        logs[r] = test::logged_without_clock(run);
        ckpts[r] = nn::load_checkpoint((run / "latest.ckpt").string());
      }
      INFO("device " << device << ", model " << model);
      REQUIRE(logs[0].size() >= 7);  // 6 train lines and the final one
      CHECK(logs[0] == logs[1]);
      REQUIRE(ckpts[0].model.size() == ckpts[1].model.size());
      for (const auto& [name, t] : ckpts[0].model) {
        INFO(name);
        CHECK(t.to_vector<float>() == ckpts[1].model.at(name).to_vector<float>());
      }
      for (const auto& [name, t] : ckpts[0].optimizer.tensors) {
        INFO("optimizer " << name);
        CHECK(t.to_vector<float>() == ckpts[1].optimizer.tensors.at(name).to_vector<float>());
      }
    }
  }
  fs::remove_all(root);
}
