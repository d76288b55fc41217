// A training run killed with SIGKILL (as by the OOM killer, a power cut or `kill -9`) loses only
// the steps since its last checkpoint: resumed with --resume, it logs exactly the losses, gradient
// norms, validations and final perplexities of a run that was never interrupted, and leaves no
// temporary file behind. The kills land at random moments (seeded), and twice on purpose: while
// the first file of the run is written (before any checkpoint exists) and in the middle of writing
// a checkpoint (core/crash_point.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>


#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/runs.h"
#include "support/define_process.h"
#include "nn/checkpoint.h"
#include "support/common.h"

using namespace define;
namespace fs = std::filesystem;

namespace {

// The step of the last training line in metrics.jsonl (0 when there is none). The last line may be
// half written: a number cut short only reads as an earlier step.
std::int64_t last_logged_step(const fs::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::int64_t step = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.find("\"event\":\"train\"") == std::string::npos) continue;
    const auto at = line.find("\"step\":");
    if (at != std::string::npos) step = std::atoll(line.c_str() + at + 7);
  }
  return step;
}


}  // namespace

TEST_CASE("crash safety: a run killed at random moments resumes to exactly the uninterrupted run", "[cli][crash]") {
  const fs::path root = test::fresh_root("define_crash_safety_test", 777, 120, 20);
  // About 29 steps an epoch: 200 steps cross six epoch ends (validation, best.ckpt, NT-ASGD's
  // switch to averaging with nonmono 1). A checkpoint every 4 steps and a log line every 3, so a
  // checkpoint often falls inside a log window.
  const std::string config = R"({"data": {"dir": ")" + (root / "data").string() + R"(", "batch_size": 4,
      "eval_batch_size": 2, "test_batch_size": 2, "bptt": 8},
    "model": {"type": "lstm_lm", "input": {"type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 2, "g_max": 2},
              "hidden": 32, "layers": 2,
              "dropout": {"embedding": 0.1, "input": 0.2, "hidden": 0.2, "output": 0.2, "weight": 0.3}},
    "train": {"optimizer": "ntasgd", "lr": 5, "nonmono": 1, "epochs": 8, "max_steps": 200, "log_interval": 3,
              "checkpoint_interval": 4, "threads": 1}})";
  {
    std::ofstream(root / "config.json") << config;
  }
  auto args = [&](const char* run, bool resume) {
    std::vector<std::string> a = {"train", "--config", (root / "config.json").string(), "--run-dir", (root / run).string()};
    if (resume) a.push_back("--resume");
    return a;
  };

  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(test::DefineProcess(args("whole", false), root / "whole.log").wait() == 0);
  const double whole_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<std::string> expected = test::logged_without_clock(root / "whole");
  REQUIRE(expected.size() > 25);

  const fs::path run = root / "killed";
  const fs::path log = root / "killed.log";
  // 1. Killed while writing its first file (config.json): no checkpoint exists yet.
  CHECK(test::DefineProcess(args("killed", false), log, test::crash_at("atomic_write:1")).wait() == -SIGKILL);
  CHECK_FALSE(fs::exists(run / "latest.ckpt"));
  CHECK(test::temporaries(run).size() == 1);
  // 2. Resumed: it starts again from the beginning, then is killed half-way through writing its
  // second checkpoint (files written: config.json, vocab.txt, checkpoint 1, checkpoint 2).
  CHECK(test::DefineProcess(args("killed", true), log, test::crash_at("atomic_write:4")).wait() == -SIGKILL);
  CHECK(test::temporaries(run).size() == 1);
  CHECK(nn::load_checkpoint((run / "latest.ckpt").string()).run.at("step") == "4");
  // 3. Resumed and killed at random moments: half of the kills after a random delay, half once
  // the run has logged a randomly chosen step (so they land inside training however loaded the
  // machine is, not only during start-up).
  std::mt19937 rng(20261125);
  std::uniform_real_distribution<double> when(0.0, 0.5 * whole_s);
  int killed = 0;
  for (int i = 0; i < 10; ++i) {
    const std::int64_t from = last_logged_step(run);
    const std::int64_t target = std::min<std::int64_t>(198, from + std::uniform_int_distribution<std::int64_t>(3, 40)(rng));
    test::DefineProcess p(args("killed", true), log);
    int status = 0;
    bool ended = false;
    if (i % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(when(rng)));
      ended = p.finished(status);
    } else {
      while (!(ended = p.finished(status)) && last_logged_step(run) < target)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (ended) {
      REQUIRE(status == 0);  // it got to the end before the kill
      continue;
    }
    p.kill9();
    killed += p.wait() == -SIGKILL;
  }
  INFO("whole run " << whole_s << " s");
  CHECK(killed >= 5);
  // 4. Resumed to the end.
  REQUIRE(test::DefineProcess(args("killed", true), log).wait() == 0);

  // The kills landed during training, not only during start-up: the resumes began at several
  // different checkpoints.
  std::set<std::string> resumed_at;
  {
    std::ifstream f(log);
    for (std::string line; std::getline(f, line);)
      if (const auto at = line.find(", step "); line.rfind("resuming ", 0) == 0 && at != std::string::npos)
        resumed_at.insert(line.substr(at + 7));
  }
  INFO("resumed at steps: " << fmt::format("{}", fmt::join(resumed_at, " ")));
  CHECK(resumed_at.size() >= 5);

  CHECK(test::logged_without_clock(run) == expected);
  CHECK(test::temporaries(run).empty());
  const nn::Checkpoint a = nn::load_checkpoint((root / "whole" / "latest.ckpt").string());
  const nn::Checkpoint b = nn::load_checkpoint((run / "latest.ckpt").string());
  REQUIRE(a.model.size() == b.model.size());
  for (const auto& [name, t] : a.model) CHECK(t.to_vector<float>() == b.model.at(name).to_vector<float>());
  fs::remove_all(root);
}
