// `define params` on every shipped config: each one prints its per-part table, taking the
// vocabulary size from the config, from --vocab-size, or from the corpus the config trains on (the
// ptb-* and wt2-* configs name no size). The counts themselves are asserted in
// tests/models/configs_test.cpp; here the totals that depend on the corpus's vocabulary are.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/trained_run.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "support/common.h"
#include "tools/command.h"

using namespace define;
using Catch::Contains;
using define::test::capture;
namespace fs = std::filesystem;

namespace {

// The exact total of a printed table ("total   3,532,944   3.53"), commas removed.
std::int64_t printed_total(const std::string& out) {
  const auto at = out.find("\ntotal");
  REQUIRE(at != std::string::npos);
  std::string digits;
  std::size_t i = at + 6;
  while (i < out.size() && out[i] == ' ') ++i;
  for (; i < out.size() && (std::isdigit(static_cast<unsigned char>(out[i])) || out[i] == ','); ++i)
    if (out[i] != ',') digits += out[i];
  REQUIRE_FALSE(digits.empty());
  return std::stoll(digits);
}

std::string config_path(const std::string& name) { return std::string(DEFINE_SOURCE_DIR) + "/configs/" + name; }

}  // namespace

TEST_CASE("params: every config in configs/ prints its parameter table", "[cli][params]") {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(std::string(DEFINE_SOURCE_DIR) + "/configs"))
    if (entry.path().extension() == ".json") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 27);
  for (const std::string& name : names) {
    INFO(name);
    const std::string out = capture(cli::run_params, {"--config", config_path(name)});
    CHECK_THAT(out, Contains(name));
    CHECK(printed_total(out) > 0);
  }
}

TEST_CASE("params: the vocabulary comes from the corpus, --vocab-size or the config", "[cli][params]") {
  // The main job's config names no vocabulary size: PTB's 10,000 words give the README's 3.53 M.
  CHECK(printed_total(capture(cli::run_params, {"--config", config_path("ptb-define-lstm.json")})) == 3'532'944);
  CHECK(printed_total(capture(cli::run_params, {"--config", config_path("ptb-define-lstm.json"), "--vocab-size", "10000"})) ==
        3'532'944);
  // WikiText-2's 33,278 words: the standard Transformer-XL of docs/results.md (11.97 M).
  const std::int64_t wt2 = printed_total(capture(cli::run_params, {"--config", config_path("wt2-transformer-xl-standard.json")}));
  CHECK(wt2 == printed_total(capture(cli::run_params, {"--config", config_path("wt2-transformer-xl-standard.json"),
                                                       "--vocab-size", "33278"})));
  CHECK(wt2 > 11'960'000);
  CHECK(wt2 < 11'980'000);
  // A config that fixes its size disagrees with another one only when asked to.
  CHECK_THROWS_WITH(cli::run_params({"--config", config_path("awd-lstm-ptb.json"), "--vocab-size", "5"}),
                    Contains("vocab_size = 10000 but the data's vocabulary has 5 words"));
}

TEST_CASE("params: models built for counting draw no random values", "[cli][params]") {
  Generator gen(3);
  {
    const nn::init::ShapesOnlyGuard shapes_only;
    const nn::Linear counted(64, 32, {}, gen);
    CHECK(counted.num_parameters() == 64 * 32 + 32);
    CHECK(define::test::max_abs(counted.weight()) == 0.0);
  }
  // Outside the guard the initialisers draw again.
  const nn::Linear trained(64, 32, {}, gen);
  CHECK(define::test::max_abs(trained.weight()) > 0.1);
}
