// The command line's refusals of bad options (tools/options.h, tools/dispatch.h), in particular
// those the command-line fuzzer (tests/fuzz/fuzz_cli.cpp) found letting an exception other than
// define::Error escape (`define` then exits with "internal error", status 3); their inputs are in
// tests/fuzz/regressions/fuzz_cli/.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "support/common.h"
#include "tools/command.h"
#include "tools/dispatch.h"
#include "tools/options.h"
#include "train/corpus_location.h"

using namespace define;
using Catch::Contains;

TEST_CASE("cli: integer and number options refuse text and out-of-range values", "[cli]") {
  const cli::OptionSpec spec{.required = {}, .repeated = {}, .optional = {"n", "x"}, .flags = {}};
  const cli::Options big = cli::parse_options("t", {"--n", "99999999999999999999"}, spec);
  CHECK_THROWS_WITH(big.get_int("n"), Contains("--n: 99999999999999999999 is out of the 64-bit integer range"));
  CHECK(cli::parse_options("t", {"--n=-9223372036854775808"}, spec).get_int("n") == INT64_MIN);
  CHECK_THROWS_WITH(cli::parse_options("t", {"--x", "1.5e"}, spec).get_double("x"), Contains("--x expects a number"));
  CHECK(cli::parse_options("t", {"--x", "2.5"}, spec).get_double("x") == 2.5);
}

TEST_CASE("cli: demo's options are errors, not exceptions from std::stoi", "[cli]") {
  CHECK_THROWS_WITH(cli::parse_demo_options({"--steps", "x"}), Contains("--steps expects an integer, got 'x'"));
  CHECK_THROWS_WITH(cli::parse_demo_options({"--hidden", "99999999999"}), Contains("--hidden must be in [1, 4096]"));
  CHECK_THROWS_WITH(cli::parse_demo_options({"--lr", "nan"}), Contains("--lr must be a positive finite number"));
  CHECK_THROWS_WITH(cli::parse_demo_options({"--seed", "-1"}), Contains("--seed must be at least 0"));
  CHECK_THROWS_WITH(cli::parse_demo_options({"--steps"}), Contains("--steps needs a value"));
  CHECK(cli::parse_demo_options({"--help"}).help);  // and run_demo returns instead of exiting the process
  const cli::DemoSettings s = cli::parse_demo_options({"--steps=10", "--hidden", "8", "--lr", "0.5", "--seed", "3"});
  CHECK((s.steps == 10 && s.hidden == 8 && s.lr == 0.5 && s.seed == 3));
}

TEST_CASE("cli: a file name the system refuses is a define::Error naming it", "[cli]") {
  const std::string long_name(300, 'r');  // over NAME_MAX (255): ENAMETOOLONG, not "not found"
  CHECK_THROWS_WITH(cli::run_eval({"--run", long_name}), Contains("run folder '" + long_name + "' does not exist"));
  CHECK_THROWS_AS(train::find_corpus(long_name), Error);
  CHECK(cli::run_command("eval", {"--run", long_name}) == 2);  // an error, not an internal error (3)
}

TEST_CASE("cli: --set data.dir replaces the config's data.corpus, and the other way round", "[cli]") {
  const std::filesystem::path file = test::scratch_path("define_options_test_alternatives.json");
  std::ofstream(file) << R"({"data": {"corpus": "wikitext-103", "bptt": 5}, "model": {"type": "lstm_lm"}})";
  const cli::OptionSpec spec{.required = {"config"}, .repeated = {"set"}, .optional = {}, .flags = {}};
  const Config by_dir =
      cli::load_config(cli::parse_options("t", {"--config", file.string(), "--set", "data.dir=/x/wt103"}, spec));
  CHECK(by_dir.has("data.dir"));
  CHECK_FALSE(by_dir.has("data.corpus"));
  CHECK(by_dir.section("data").get_int("bptt") == 5);
  CHECK(by_dir.resolved().find("wikitext-103") == std::string::npos);
  const Config back = cli::load_config(
      cli::parse_options("t", {"--config", file.string(), "--set", "data.dir=/x", "--set", "data.corpus=ptb"}, spec));
  CHECK_FALSE(back.has("data.dir"));
  CHECK(back.section("data").get_string("corpus") == "ptb");
  const Config untouched =
      cli::load_config(cli::parse_options("t", {"--config", file.string(), "--set", "data.bptt=7"}, spec));
  CHECK(untouched.section("data").get_string("corpus") == "wikitext-103");
  std::filesystem::remove(file);
}

TEST_CASE("cli: a named corpus is found under WikiText's own file names too", "[cli]") {
  const std::filesystem::path root = test::scratch_path("define_options_test_wiki");
  std::filesystem::create_directories(root / "wikitext-103");
  for (const char* f : {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"})
    std::ofstream(root / "wikitext-103" / f) << "a b\n";
  const char* old = std::getenv("DEFINE_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("DEFINE_DATA_DIR", root.c_str(), 1);
  CHECK(train::find_corpus("wikitext-103") == (root / "wikitext-103").string());
  CHECK_THROWS_WITH(train::find_corpus("wikitext-7"), Contains("corpus 'wikitext-7' not found"));
  if (old)
    ::setenv("DEFINE_DATA_DIR", saved.c_str(), 1);
  else
    ::unsetenv("DEFINE_DATA_DIR");
  std::filesystem::remove_all(root);
}
