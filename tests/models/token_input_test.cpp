// TokenInput details that the model tests do not see: the adaptive map's scaling (once per band,
// never again on top) and the token cache refusing to serve rows that a parameter update made
// stale.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "models/token_representation.h"
#include "nn/optim/sgd.h"
#include "test_util.h"

using namespace define;
using Catch::Contains;

namespace {

models::TokenInputConfig input_config(const std::string& json, std::int64_t vocab) {
  return models::read_token_input_config(Config::from_text(json, "<test>"), vocab);
}

}  // namespace

TEST_CASE("token input: an adaptive map scales each band by sqrt(its width) exactly once", "[models]") {
  // V 20, n 16, cutoffs {10}, factor 2: band 0 is ids 0-9 at width 16, band 1 ids 10-19 at width 8
  // (projected to 16).
  for (const bool explicit_scale : {false, true}) {
    INFO("scale given: " << explicit_scale);
    const std::string scale = explicit_scale ? R"("scale": true,)" : "";
    const models::TokenInputConfig cfg = input_config(
        R"({"type": "define", "dim": 16, "out_dim": 8, "k": 32, "depth": 2, "g_max": 2, "map": "adaptive",)" + scale +
            R"("cutoffs": [10], "factor": 2})",
        20);
    CHECK(cfg.scale);
    Generator gen(5);
    const models::TokenInput input(cfg, gen);
    const nn::AdaptiveInput& bands = *input.adaptive();
    const std::vector<float> rows =
        input.map_rows(from_vector(std::vector<std::int64_t>{3, 12}, {2})).to_vector<float>();
    REQUIRE(rows.size() == 32);
    // Id 3: band 0's row 3 times sqrt(16).
    const std::vector<float> t0 = bands.embedding(0).to_vector<float>();
    for (int j = 0; j < 16; ++j) CHECK(rows[j] == Approx(4.0 * t0[3 * 16 + j]).margin(1e-6));
    // Id 12: band 1's row 2 times sqrt(8), through the band's projection [16, 8].
    const std::vector<float> t1 = bands.embedding(1).to_vector<float>(), p1 = bands.projection(1).to_vector<float>();
    for (int i = 0; i < 16; ++i) {
      double want = 0;
      for (int j = 0; j < 8; ++j) want += p1[i * 8 + j] * t1[2 * 8 + j] * std::sqrt(8.0);
      CHECK(rows[16 + i] == Approx(want).margin(1e-5));
    }
  }
  // scale: false turns the band scaling off (it used to be ignored).
  const models::TokenInputConfig plain = input_config(
      R"({"type": "adaptive", "dim": 16, "cutoffs": [10], "factor": 2, "scale": false})", 20);
  Generator gen(5);
  const models::TokenInput input(plain, gen);
  const std::vector<float> row = input.forward(from_vector(std::vector<std::int64_t>{3}, {1})).to_vector<float>();
  const std::vector<float> t0 = input.adaptive()->embedding(0).to_vector<float>();
  for (int j = 0; j < 16; ++j) CHECK(row[j] == t0[3 * 16 + j]);
}

TEST_CASE("token input: a cached table is refused once a parameter changed", "[models]") {
  const models::TokenInputConfig cfg =
      input_config(R"({"type": "define", "dim": 8, "out_dim": 6, "k": 16, "depth": 2, "g_max": 2})", 12);
  Generator gen(9);
  models::TokenInput input(cfg, gen);
  input.eval();
  const Tensor ids = from_vector(std::vector<std::int64_t>{1, 4}, {2, 1});
  input.use_cache(input.compute_cache());
  const std::vector<double> cached = test::values(input.forward(ids));
  input.use_cache({});
  const auto near_cached = [&](const Tensor& got) { return test::max_diff(test::values(got), cached) < 1e-5; };
  CHECK(near_cached(input.forward(ids)));

  SECTION("an optimizer step") {
    input.use_cache(input.compute_cache());
    for (const Tensor& p : input.parameters()) p.set_grad(ones_like(p));
    optim::SGD sgd(input.parameters(), {.lr = 0.1});
    sgd.step();
    CHECK_THROWS_WITH(input.forward(ids), Contains("the cached table is stale: parameter 'map.weight' changed"));
    // A fresh cache serves again, with the new rows.
    input.use_cache({});
    input.use_cache(input.compute_cache());
    CHECK_FALSE(near_cached(input.forward(ids)));
  }
  SECTION("an in-place change of one unit weight") {
    input.use_cache(input.compute_cache());
    NoGradGuard no_grad;
    copy_(input.parameter("unit.reduce.weight"), zeros_like(input.parameter("unit.reduce.weight")));
    CHECK_THROWS_WITH(input.forward(ids), Contains("parameter 'unit.reduce.weight' changed after use_cache()"));
  }
}
