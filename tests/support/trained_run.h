// Shared by the tests of the commands that read a trained run (eval, generate, export, import,
// corrmap, export-cache): a tiny DeFINE LSTM language model trained once per test process on a
// generated 40-word corpus, the config text it was trained from, and helpers to call a command and
// read what it printed.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "support/common.h"  // read_all, for the tests that include this header
#include "train/lm_trainer.h"

namespace define::test {

inline constexpr const char* kDefineInput = R"({"type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 2, "g_max": 2})";
inline constexpr const char* kEmbeddingInput = R"({"type": "embedding", "dim": 8})";

// The config of the shared run with another `input` section and train limit ("epochs": 1, ...),
// reading the corpus in `data`.
std::string lm_config_text(const std::filesystem::path& data, const std::string& input, const std::string& train_limit);

struct TrainedRun {
  std::filesystem::path root;  // scratch folder of this process (the corpus is in root / "data"), removed at exit
  std::string dir;             // the run folder
  train::TrainResult result;
};
// The DeFINE-input run, trained for one epoch on first use.
const TrainedRun& define_run();

// Runs a command (cli::run_eval, ...) with stdout redirected and returns what it printed; checks
// that it returned 0.
std::string capture(const std::function<int(const std::vector<std::string>&)>& command,
                    const std::vector<std::string>& args);
// The "loss" of the JSON line of `mode` printed by `define eval --json`.
double json_loss(const std::string& out, const std::string& mode);

}  // namespace define::test
