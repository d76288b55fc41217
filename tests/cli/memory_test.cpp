// `define memory`: the plan of a shipped config, the search for the setting that makes a run fit a
// smaller card, and its errors. The plan's numbers themselves are tested in
// tests/train/memory_plan_test.cpp.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "kernels/cuda/device.h"
#include "support/common.h"
#include "support/trained_run.h"
#include "tools/command.h"

using namespace define;
using Catch::Contains;
using define::test::capture;

namespace {

std::string config_path(const std::string& name) { return std::string(DEFINE_SOURCE_DIR) + "/configs/" + name; }

}  // namespace

TEST_CASE("define memory: a shipped config's plan, and the setting that makes it fit a small card", "[cli][memory]") {
  if (!define::cuda_emu::caching_allocator_enabled())
    DEFINE_SKIP_TEST("reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off (ctest runs it "
                     "again with the cache on)");
  // Multi30k's Transformer: data.max_tokens 4096 in sentences of 30 tokens, Adam.
  const std::string config = config_path("multi30k-transformer.json");
  const std::string out = capture(cli::run_memory, {"--config", config});
  CHECK_THAT(out, Contains("(transformer_nmt, 7.58 M parameters), 1 rank(s)") &&
                      Contains("136 sentences of 30 tokens a side") && Contains("(adamw)") &&
                      Contains("measured on emu:0 (dry run)") && Contains("fits in 11 GiB: yes"));
  // On a card of 0.9 GiB it does not fit as it is; batches of a quarter of the tokens, four a step, do.
  const std::string small = capture(cli::run_memory, {"--config", config, "--gpu-gib", "0.9", "--ranks", "2"});
  CHECK_THAT(small, Contains("2 rank(s)") && Contains("reducer buckets") && Contains("fits in 0.9 GiB: no") &&
                        Contains("fits in 0.9 GiB with --set train.update_freq=4 --set data.max_tokens=1024"));
}

TEST_CASE("define memory: bad options are errors that name them", "[cli][memory]") {
  const std::string config = config_path("multi30k-transformer.json");
  CHECK_THROWS_WITH(capture(cli::run_memory, {"--config", config, "--gpu-gib", "0"}),
                    Contains("--gpu-gib must be positive"));
  CHECK_THROWS_WITH(capture(cli::run_memory, {"--config", config, "--ranks", "0"}), Contains("ranks must be positive"));
  CHECK_THROWS_WITH(capture(cli::run_memory, {"--config", config, "--sentence-length", "1"}),
                    Contains("sentence length must be at least 2"));
}
