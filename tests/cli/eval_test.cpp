// `define eval`, `generate` and `export-cache` on a tiny trained DeFINE LSTM (support/trained_run.h):
// eval reproduces the trainer's perplexities, the token cache gives the same perplexity as the
// unit and is refused when made from other weights, generation is reproducible per seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "models/token_cache.h"
#include "nn/safetensors.h"
#include "support/trained_run.h"
#include "tools/command.h"
#include "train/run_loader.h"

using namespace define;
using Catch::Contains;
using define::test::capture;
using define::test::define_run;
using define::test::read_all;
using define::test::TrainedRun;
namespace fs = std::filesystem;
using define::test::json_loss;

namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

TEST_CASE("eval: reproduces the trainer's perplexities, and the exported token cache gives the same",
          "[cli][commands]") {
  const TrainedRun& run = define_run();
  REQUIRE(fs::exists(fs::path(run.dir) / "best.ckpt"));

  const double valid = json_loss(capture(cli::run_eval, {"--run", run.dir, "--json"}), "unit");
  const double test = json_loss(capture(cli::run_eval, {"--run", run.dir, "--split", "test", "--json"}), "unit");
  // Same weights, batch sizes, bptt and thread count as the trainer's final evaluation.
  CHECK(valid == run.result.valid_loss);
  CHECK(test == run.result.test_loss);
  CHECK(std::exp(valid) < 41.0);  // learned something: below the uniform guess over 41 words

  // Text output: loss, perplexity, tokens. valid: 20 lines x 9 tokens = 180, batchify(2) -> 90
  // rows, 89 input rows x 2 streams = 178 tokens.
  const std::string text = capture(cli::run_eval, {"--run", run.dir});
  CHECK_THAT(text, Contains(fmt::format("perplexity {:.2f}", std::exp(run.result.valid_loss))));
  CHECK_THAT(text, Contains("178 tokens"));

  const std::string cache = (run.root / "cache.safetensors").string();
  const std::string exported = capture(cli::run_export_cache, {"--run", run.dir, "--out", cache});
  CHECK_THAT(exported, Contains("41 x 12 table"));
  const models::TokenCacheFile file = models::load_token_cache(cache);
  CHECK(file.table.shape() == Shape{41, 12});
  CHECK(file.vocab_size == 41);
  CHECK(file.width == 12);
  CHECK(file.input_type == "define");

  // The table's rows are the unit's outputs for each id.
  train::LoadedRun loaded = train::load_run(run.dir);
  const models::TokenInput& input = loaded.token_input();
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 7, 40}, {3, 1});
  const std::vector<float> direct = reshape(input.forward(ids), {3, 12}).to_vector<float>();
  const std::vector<float> table = file.table.to_vector<float>();
  const int rows[] = {0, 7, 40};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 12; ++c) CHECK(table[rows[r] * 12 + c] == Approx(direct[r * 12 + c]).margin(1e-6));

  // use_cache: the table must fit, and serves eval only.
  models::TokenInput& mutable_input = loaded.model->submodule_as<models::TokenInput>("input");
  CHECK_THROWS_WITH(mutable_input.use_cache(zeros({41, 11})),
                    Contains("cached table has shape [41,11], this input needs [41,12]"));
  mutable_input.use_cache(file.table);
  CHECK(mutable_input.uses_cache());
  CHECK(reshape(mutable_input.forward(from_vector(std::vector<std::int64_t>{7}, {1, 1})), {12}).to_vector<float>() ==
        std::vector<float>(table.begin() + 7 * 12, table.begin() + 8 * 12));
  mutable_input.train();
  CHECK_THROWS_WITH(mutable_input.forward(ids), Contains("serves evaluation only"));
  mutable_input.eval();
  mutable_input.use_cache({});
  CHECK_FALSE(mutable_input.uses_cache());

  for (const char* split : {"valid", "test"}) {
    const double with_cache =
        json_loss(capture(cli::run_eval, {"--run", run.dir, "--split", split, "--cache", cache, "--json"}), "cache");
    const double reference = std::string(split) == "valid" ? run.result.valid_loss : run.result.test_loss;
    CHECK(std::abs(std::exp(with_cache) - std::exp(reference)) / std::exp(reference) < 1e-5);
  }
  // --compare: both timings and the agreement line; without --cache the table is computed here.
  const std::string compared = capture(cli::run_eval, {"--run", run.dir, "--cache", cache, "--compare"});
  CHECK_THAT(compared,
             Contains("unit:") && Contains("cache:") && Contains("cache vs unit: perplexity relative difference"));
  CHECK_THAT(capture(cli::run_eval, {"--run", run.dir, "--compare"}), Contains("cache vs unit"));

  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--split", "train"}),
                    Contains("--split must be valid or test, got 'train'"));
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--cache", (run.root / "nothing.safetensors").string()}),
                    Contains("nothing.safetensors"));
  // A checkpoint is not a cache.
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--cache", run.dir + "/best.ckpt"}),
                    Contains("is not a token cache"));
}

TEST_CASE("eval: a cache made from other weights is refused", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const std::string cache = (run.root / "stale_cache.safetensors").string();
  const std::string weights = (run.root / "stale_weights.safetensors").string();
  capture(cli::run_export_cache, {"--run", run.dir, "--out", cache});
  capture(cli::run_export, {"--run", run.dir, "--out", weights});
  // Other weights: the same model with its map table doubled, imported as a checkpoint.
  nn::SafetensorsContents file = nn::load_safetensors(weights);
  for (auto& [name, t] : file.tensors)
    if (name == "input.map.weight") t = mul(t, 2.0);
  nn::save_safetensors(weights, file.tensors, file.metadata);
  const std::string ckpt = (run.root / "doubled.ckpt").string();
  capture(cli::run_import, {"--run", run.dir, "--from", weights, "--out", ckpt});
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--checkpoint", ckpt, "--cache", cache}),
                    Contains("was computed from other weights") && Contains("export the cache again"));
  // Its own cache is accepted.
  const std::string fresh = (run.root / "fresh_cache.safetensors").string();
  capture(cli::run_export_cache, {"--run", run.dir, "--checkpoint", ckpt, "--out", fresh});
  CHECK_THAT(capture(cli::run_eval, {"--run", run.dir, "--checkpoint", ckpt, "--cache", fresh, "--compare"}),
             Contains("cache vs unit"));
}

TEST_CASE("generate: reproducible per seed, vocabulary words only, unknown prompt words named", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const train::LoadedRun loaded = train::load_run(run.dir);
  const std::vector<std::string> a = {"--run", run.dir, "--words", "40", "--seed", "7"};
  const std::string first = capture(cli::run_generate, a), second = capture(cli::run_generate, a);
  CHECK(first == second);
  const std::string other = capture(cli::run_generate, {"--run", run.dir, "--words", "40", "--seed", "8"});
  CHECK(other != first);

  // 40 sampled words: every <eos> is a line break, everything else a vocabulary word.
  const std::vector<std::string> words = split_words(first);
  const auto breaks = static_cast<std::size_t>(std::count(first.begin(), first.end(), '\n'));
  CHECK(first.back() == '\n');
  CHECK(words.size() + breaks >= 40);  // the final '\n' closes the last line
  CHECK(words.size() + breaks <= 41);
  for (const std::string& w : words) {
    CHECK(loaded.vocab.contains(w));
    CHECK(w != "<eos>");
  }

  // The prompt is printed first; temperature 0 is greedy, so the seed does not matter.
  const std::string greedy1 = capture(
      cli::run_generate, {"--run", run.dir, "--prompt", "w3 w4", "--words", "10", "--temperature", "0", "--seed", "1"});
  const std::string greedy2 = capture(
      cli::run_generate, {"--run", run.dir, "--prompt", "w3 w4", "--words", "10", "--temperature", "0", "--seed", "2"});
  CHECK(greedy1 == greedy2);
  CHECK(greedy1.rfind("w3 w4", 0) == 0);

  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--prompt", "w3 zebra w4"}),
                    Contains("prompt word 'zebra' is not in the run's vocabulary (41 words"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--temperature", "-1"}), Contains("--temperature must be"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--words", "x"}),
                    Contains("--words expects an integer, got 'x'"));

  // Top-1 and a nucleus smaller than any word's probability are greedy decoding, whatever the seed;
  // a wider top-k samples.
  const std::vector<std::string> prompt = {"--run", run.dir, "--prompt", "w3 w4", "--words", "10"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = prompt;
    a.insert(a.end(), extra.begin(), extra.end());
    return capture(cli::run_generate, a);
  };
  CHECK(with({"--top-k", "1", "--seed", "5"}) == greedy1);
  CHECK(with({"--top-p", "1e-6", "--seed", "6"}) == greedy1);
  CHECK(with({"--top-k", "20", "--seed", "5"}) != greedy1);
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--top-k", "-2"}), Contains("--top-k must be >= 0"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--top-p", "0"}), Contains("--top-p must be in (0, 1]"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--top-p", "1.01"}), Contains("--top-p must be in (0, 1]"));
}

TEST_CASE("export-cache: an embedding-input model is refused with a clear message", "[cli][commands]") {
  const TrainedRun& run = define_run();
  Config cfg =
      Config::from_text(test::lm_config_text(run.root / "data", test::kEmbeddingInput, R"("max_steps": 2)"), "<test>");
  const std::string dir = (run.root / "embedding").string();
  train::train_language_model(cfg, dir, false);
  CHECK_THROWS_WITH(cli::run_export_cache({"--run", dir, "--out", (run.root / "e.safetensors").string()}),
                    Contains("has input type 'embedding', which has no unit to cache"));
  CHECK_THROWS_WITH(cli::run_eval({"--run", dir, "--compare"}),
                    Contains("--compare needs a model whose input has a unit"));
  // Eval and corrmap still work: the table is the representation.
  CHECK_THAT(capture(cli::run_eval, {"--run", dir}), Contains("perplexity"));
  CHECK_THAT(capture(cli::run_corrmap, {"--run", dir, "--out", (run.root / "e.png").string(), "--size", "16"}),
             Contains("map (8 features"));
  CHECK_THROWS_WITH(cli::run_corrmap({"--run", dir, "--out", (run.root / "e.png").string(), "--layer", "out"}),
                    Contains("available: map, all"));
}

// --context-window: the same tokens scored once each (178), the protocol named, an LSTM evaluated
// without its carried state in overlapping windows; a context as long as the window is refused.
TEST_CASE("eval: --context-window scores every token once in overlapping windows without carried state",
          "[cli][commands]") {
  const TrainedRun& run = define_run();
  const std::string text = capture(cli::run_eval, {"--run", run.dir, "--bptt", "10", "--context-window", "6"});
  CHECK_THAT(text, Contains("bptt 10, context window 6 (stride 4, no state carried)") && Contains("178 tokens"));
  const double windowed =
      json_loss(capture(cli::run_eval, {"--run", run.dir, "--bptt", "10", "--context-window", "6", "--json"}), "unit");
  const double carried = json_loss(capture(cli::run_eval, {"--run", run.dir, "--bptt", "10", "--json"}), "unit");
  CHECK(std::isfinite(windowed));
  CHECK(windowed != carried);  // the LSTM's state is not carried across windows here
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--bptt", "10", "--context-window", "10"}),
                    Contains("--context-window must be at least 0 and less than the window (--bptt 10), got 10"));
}
