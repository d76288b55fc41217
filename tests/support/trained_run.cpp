#include "support/trained_run.h"

#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "support/runs.h"
#include "core/config.h"

namespace define::test {

namespace fs = std::filesystem;

std::string lm_config_text(const fs::path& data, const std::string& input, const std::string& train_limit) {
  return R"({"data": {"dir": ")" + data.string() + R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 3, "bptt": 8},
    "model": {"type": "lstm_lm", "input": )" + input + R"(, "hidden": 10, "layers": 2,
              "dropout": {"embedding": 0.1, "input": 0.2, "hidden": 0.2, "output": 0.2, "weight": 0.3}},
    "train": {"optimizer": "ntasgd", "lr": 5, )" + train_limit + R"(, "log_interval": 50, "threads": 1}})";
}

namespace {

// Removes the scratch folder when the process ends.
struct ScratchFolder {
  fs::path path;
  ~ScratchFolder() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

// Trained once per process (ctest runs each case in its own process, possibly in parallel: the
// folder carries the pid).
const TrainedRun& define_run() {
  static ScratchFolder scratch;
  static const TrainedRun run = [] {
    TrainedRun r;
    r.root = fs::temp_directory_path() / ("define_commands_test_" + std::to_string(::getpid()));
    scratch.path = r.root;
    fs::remove_all(r.root);
    write_tiny_corpus(r.root / "data", 987654321, 120, 20);
    Config cfg = Config::from_text(lm_config_text(r.root / "data", kDefineInput, R"("epochs": 1)"), "<test>");
    r.dir = (r.root / "define").string();
    r.result = train::train_language_model(cfg, r.dir, false);
    return r;
  }();
  return run;
}

// Runs a command with stdout redirected to a temporary file and returns what it printed.
std::string capture(const std::function<int(const std::vector<std::string>&)>& command, const std::vector<std::string>& args) {
  std::fflush(stdout);
  char name[] = "/tmp/define_commands_outXXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  const int saved = ::dup(1);
  ::dup2(fd, 1);
  auto restore = [&] {
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
  };
  int rc = 0;
  try {
    rc = command(args);
  } catch (...) {
    restore();
    ::close(fd);
    ::unlink(name);
    throw;
  }
  restore();
  const std::string printed = read_all(name);
  ::close(fd);
  ::unlink(name);
  CHECK(rc == 0);
  return printed;
}

// The "loss" of the JSON line of `mode` printed by `define eval --json`.
double json_loss(const std::string& out, const std::string& mode) {
  const std::string tag = "\"mode\": \"" + mode + "\", \"loss\": ";
  const auto at = out.find(tag);
  REQUIRE(at != std::string::npos);
  return std::strtod(out.c_str() + at + tag.size(), nullptr);
}

}  // namespace define::test
