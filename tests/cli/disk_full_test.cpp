// A disk that fills up during training (simulated by a file-size limit on the `define` process:
// write() then fails with EFBIG as a full file system fails with ENOSPC) ends the run with an
// error naming the checkpoint and the cause, keeps the previous checkpoint intact and loadable, or,
// with train.on_checkpoint_error = continue, reports every failed checkpoint and goes on training.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/runs.h"
#include "support/define_process.h"
#include "nn/checkpoint.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

TEST_CASE("disk full: a checkpoint that cannot be written stops the run or is reported, never lost silently",
          "[cli][disk-full]") {
  const fs::path root = test::fresh_root("define_disk_full_test", 99, 120, 20);
  {
    std::ofstream(root / "config.json") << R"({"data": {"dir": ")" + (root / "data").string() +
                                               R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 2, "bptt": 8},
      "model": {"type": "lstm_lm", "input": {"type": "embedding", "dim": 16}, "hidden": 32, "layers": 1},
      "train": {"optimizer": "sgd", "lr": 1, "max_steps": 8, "log_interval": 4, "checkpoint_interval": 4, "threads": 1}})";
  }
  for (const std::string mode : {"stop", "continue"}) {
    INFO("train.on_checkpoint_error = " << mode);
    const fs::path run = root / mode;
    const fs::path log = root / (mode + ".log");
    auto args = [&](int max_steps, bool resume) {
      std::vector<std::string> a = {"train", "--config", (root / "config.json").string(), "--run-dir", run.string(),
                                    "--set", "train.max_steps=" + std::to_string(max_steps),
                                    "--set", "train.on_checkpoint_error=\"" + mode + "\""};
      if (resume) a.push_back("--resume");
      return a;
    };
    REQUIRE(test::DefineProcess(args(8, false), log).wait() == 0);
    const std::string good = test::read_all(run / "latest.ckpt");
    // Room for the log and the small files, not for another checkpoint.
    const std::uint64_t limit = good.size() / 2;
    REQUIRE(fs::file_size(run / "metrics.jsonl") * 4 < limit);

    const int rc = test::DefineProcess(args(16, true), log, test::file_size_limit(limit)).wait();
    const std::string out = test::read_all(log);
    CHECK_THAT(out, Contains("could not write '" + (run / "latest.ckpt").string() + "' (writing its temporary"));
    CHECK_THAT(out, Contains("File too large"));
    if (mode == "stop") {
      CHECK(rc == 2);
      CHECK_THAT(out, Contains("the latest checkpoint at step 12 was not saved, training stopped"));
    } else {
      CHECK(rc == 0);  // trained to the end, reporting each checkpoint it could not write
      CHECK_THAT(out, Contains("warning: the latest checkpoint at step 12 was not saved, training goes on"));
      CHECK_THAT(out, Contains("done: 16 steps"));
      CHECK_THAT(test::read_all(run / "metrics.jsonl"), Contains("\"event\":\"checkpoint_error\""));
    }
    // The previous checkpoint is the file it was, it loads, and no temporary is left.
    CHECK(test::read_all(run / "latest.ckpt") == good);
    CHECK(nn::load_checkpoint((run / "latest.ckpt").string()).run.at("step") == "8");
    CHECK(test::temporaries(run).empty());
  }
  fs::remove_all(root);
}
