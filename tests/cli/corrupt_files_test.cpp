// Every command that reads a file define wrote (a checkpoint for eval, generate and --resume, the
// token cache for eval --cache, exported weights for import, the run's config.json and vocab.txt)
// refuses a truncated, bit-flipped, empty or foreign file with an error that names the file and
// says what is wrong with it: never a crash, and never a model quietly built from bad bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/trained_run.h"
#include "core/config.h"
#include "core/error.h"
#include "core/factory.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tools/command.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct Corruption {
  const char* name;
  std::function<std::string(const std::string&)> apply;
  const char* says;  // what the error must say besides the file's name
};

std::vector<Corruption> corruptions() {
  return {
      {"truncated", [](const std::string& b) { return b.substr(0, b.size() / 2); }, "truncated"},
      {"bit-flipped",
       [](const std::string& b) {
         std::string c = b;
         c[c.size() * 3 / 4] ^= 0x10;  // in the tensor data, past the header
         return c;
       },
       "is corrupt"},
      {"empty", [](const std::string&) { return std::string(); }, "truncated or not a safetensors file (0 bytes)"},
      {"foreign (a PNG)",
       [](const std::string&) {
         std::string png = "\x89PNG\r\n\x1a\n";
         png.append(200, 'x');
         return png;
       },
       "not a safetensors file"},
  };
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A private copy of the shared trained run, so corrupting its files touches no other test.
fs::path copy_of_run(const std::string& name) {
  const test::TrainedRun& run = test::define_run();
  const fs::path dst = run.root / name;
  fs::remove_all(dst);
  fs::copy(run.dir, dst, fs::copy_options::recursive);
  return dst;
}

// 'path', as the error messages quote file names.
std::string quoted(const std::string& path) { return fmt::format("'{}'", path); }

std::string error_of_command(const std::function<int(const std::vector<std::string>&)>& command,
                             const std::vector<std::string>& args) {
  return test::error_of([&] { command(args); });
}

}  // namespace

TEST_CASE("corrupt files: every command names the bad file and the problem", "[cli][corrupt]") {
  const test::TrainedRun& shared = test::define_run();
  const fs::path run = copy_of_run("corrupt_run");
  const std::string ckpt = (run / "best.ckpt").string();
  const std::string good_ckpt = test::read_all(ckpt);
  const std::string cache = (run / "cache.safetensors").string();
  test::capture(cli::run_export_cache, {"--run", run.string(), "--out", cache});
  const std::string good_cache = test::read_all(cache);
  const std::string weights = (run / "weights.safetensors").string();
  test::capture(cli::run_export, {"--run", run.string(), "--out", weights});
  const std::string good_weights = test::read_all(weights);
  const std::string bad = (run / "bad.bin").string();

  for (const Corruption& c : corruptions()) {
    INFO(c.name);
    // eval and generate, through the run's own best.ckpt.
    write(ckpt, c.apply(good_ckpt));
    const std::string eval_error = error_of_command(cli::run_eval, {"--run", run.string()});
    CHECK_THAT(eval_error, Contains(quoted(ckpt)) && Contains(c.says));
    const std::string gen_error = error_of_command(cli::run_generate, {"--run", run.string(), "--words", "3"});
    CHECK_THAT(gen_error, Contains(quoted(ckpt)) && Contains(c.says));
    write(ckpt, good_ckpt);
    // A checkpoint named with --checkpoint.
    write(bad, c.apply(good_ckpt));
    CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string(), "--checkpoint", bad}),
               Contains(quoted(bad)) && Contains(c.says));
    // eval --cache.
    write(bad, c.apply(good_cache));
    CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string(), "--cache", bad}),
               Contains(quoted(bad)) && Contains(c.says));
    // import --from.
    write(bad, c.apply(good_weights));
    CHECK_THAT(error_of_command(cli::run_import, {"--run", run.string(), "--from", bad, "--out",
                                                  (run / "imported.ckpt").string()}),
               Contains(quoted(bad)) && Contains(c.says));
    CHECK_FALSE(fs::exists(run / "imported.ckpt"));
  }

  // A valid safetensors file that is not what the command reads.
  nn::save_safetensors(bad, {{"x", zeros({2})}});
  CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string(), "--checkpoint", bad}),
             Contains(quoted(bad) + " is a safetensors file but not a define checkpoint"));
  CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string(), "--cache", bad}), Contains("is not a token cache"));

  // The run's config.json and vocab.txt.
  const std::string config = (run / "config.json").string(), vocab = (run / "vocab.txt").string();
  const std::string good_config = test::read_all(config), good_vocab = test::read_all(vocab);
  write(config, good_config.substr(0, good_config.size() / 2));
  CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string()}), Contains(config));
  write(config, good_config);
  write(vocab, good_vocab.substr(0, good_vocab.size() / 2));
  CHECK_THAT(error_of_command(cli::run_eval, {"--run", run.string()}),
             Contains(fmt::format("'{}' is not the vocabulary '{}' was trained with", vocab, ckpt)) && Contains("changed or damaged"));
  std::string flipped = good_vocab;
  flipped[flipped.find('w', flipped.size() / 2)] = 'v';  // one letter of one word: still a valid vocabulary
  write(vocab, flipped);
  CHECK_THAT(error_of_command(cli::run_generate, {"--run", run.string()}), Contains("changed or damaged"));
  write(vocab, "");
  CHECK_THAT(error_of_command(cli::run_generate, {"--run", run.string()}), Contains(vocab));
  write(vocab, good_vocab);
  (void)shared;
}

TEST_CASE("corrupt files: --resume refuses a damaged latest checkpoint and leaves the run as it was", "[cli][corrupt]") {
  const test::TrainedRun& shared = test::define_run();
  const fs::path run = copy_of_run("corrupt_resume");
  const fs::path latest = run / "latest.ckpt";
  const std::string good = test::read_all(latest);
  const std::string metrics = test::read_all(run / "metrics.jsonl");
  for (const Corruption& c : corruptions()) {
    INFO(c.name);
    write(latest, c.apply(good));
    Config cfg = Config::from_text(test::lm_config_text(shared.root / "data", test::kDefineInput, R"("epochs": 2)"),
                                   "<test>");
    CHECK_THAT(test::error_of([&] { train::train_language_model(cfg, run.string(), true); }),
               Contains(quoted(latest.string())) && Contains(c.says));
    CHECK(test::read_all(run / "metrics.jsonl") == metrics);
  }
  // A checkpoint with a valid CRC whose run fields were edited (by hand or by another tool).
  write(latest, good);
  const nn::Checkpoint edited = nn::load_checkpoint(latest.string());
  for (const char* field : {"step", "seconds", "metrics_bytes"}) {
    INFO(field);
    nn::Checkpoint ck = edited;
    ck.run[field] = "12abc";
    nn::save_checkpoint(latest.string(), ck);
    Config cfg = Config::from_text(test::lm_config_text(shared.root / "data", test::kDefineInput, R"("epochs": 2)"),
                                   "<test>");
    CHECK_THAT(test::error_of([&] { train::train_language_model(cfg, run.string(), true); }),
               Contains(fmt::format("checkpoint field '{}' is not a number in range: '12abc'", field)));
  }
}
