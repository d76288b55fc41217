// TokenInput details that the model tests do not see: the adaptive map's scaling (once per band,
// never again on top) and the token cache refusing to serve rows that a parameter update made
// stale.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "kernels/devices.h"
#include "models/lstm_lm.h"
#include "models/token_representation.h"
#include "models/transformer_nmt.h"
#include "models/transformer_xl.h"
#include "nn/optim/sgd.h"
#include "support/common.h"

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

TEST_CASE("token input: distinct_ids lists each id once, in order, with every position's index", "[models]") {
  const Tensor tokens = from_vector(std::vector<std::int64_t>{7, 3, 7, 7, 0, 3}, {3, 2});
  const models::DistinctIds d = models::distinct_ids(tokens);
  CHECK(d.ids.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 3, 7});
  CHECK(d.positions.shape() == Shape{3, 2});
  CHECK(d.positions.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 1, 2, 2, 0, 1});
  CHECK_THROWS_WITH(models::distinct_ids(zeros({2})), Contains("int32 or int64"));
}

TEST_CASE("token input: the unit once per distinct token equals once per position, forward and backward",
          "[models][family:embedding]") {
  REQUIRE(kernels::register_devices().emu);
  const std::int64_t V = 40;
  const std::vector<std::string> inputs = {
      R"("type": "projective", "dim": 8, "out_dim": 12)",
      R"("type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 3, "g_max": 4)",
      R"("type": "define", "map": "projected", "dim": 8, "proj_dim": 12, "out_dim": 12, "k": 24, "depth": 3, "g_max": 4, "cutoffs": [20])",
      R"("type": "define-iclr", "dim": 8, "out_dim": 12, "k": 16, "depth": 3, "max_groups": 2)",
      R"("type": "dextra", "dim": 8, "out_dim": 32, "depth": 3)"};
  // A skewed batch of 9 x 6 ids: many repeats, as in text.
  Generator draw(3);
  const Tensor u = rand_uniform({9, 6}, 0.0, 1.0, {.dtype = DType::Float64}, draw);
  std::vector<std::int64_t> ids;
  for (double x : u.to_vector<double>()) ids.push_back(static_cast<std::int64_t>(V * x * x * x));
  const Tensor tokens = from_vector(ids, {9, 6});
  for (const std::string& body : inputs)
    for (const char* device : {"cpu", "emu:0"}) {
      CAPTURE(body, device);
      const Device dev = Device::parse(device);
      auto build = [&](bool distinct) {
        Generator gen(21);
        auto input = std::make_unique<models::TokenInput>(
            input_config("{" + body + R"(, "distinct_tokens": )" + (distinct ? "true" : "false") + "}", V), gen);
        input->to(dev);
        return input;
      };
      const auto distinct = build(true), per_position = build(false);
      const Tensor x = to_device(tokens, dev);
      const Tensor a = distinct->forward(x), b = per_position->forward(x);
      REQUIRE(a.shape() == b.shape());
      CHECK(test::max_diff(test::values(a), test::values(b)) < 1e-5);
      // A loss that weighs every output element differently, so each position's gradient differs.
      Generator wgen(4);
      const Tensor w = to_device(rand_uniform(a.shape(), -1.0, 1.0, {}, wgen), dev);
      backward(sum(mul(a, w)));
      backward(sum(mul(b, w)));
      const auto da = distinct->named_parameters(), db = per_position->named_parameters();
      const std::vector<std::pair<std::string, Tensor>> pa(da.begin(), da.end()), pb(db.begin(), db.end());
      REQUIRE(pa.size() == pb.size());
      for (std::size_t i = 0; i < pa.size(); ++i) {
        CAPTURE(pa[i].first);
        REQUIRE(pa[i].second.grad().defined() == pb[i].second.grad().defined());
        if (!pa[i].second.grad().defined()) continue;
        const std::vector<double> ga = test::values(pa[i].second.grad()), gb = test::values(pb[i].second.grad());
        double scale = 1e-3;
        for (double g : gb) scale = std::max(scale, std::abs(g));
        CHECK(test::max_diff(ga, gb) < 2e-5 * scale);
      }
    }
}

// A plain embedding's scale follows the reference of the model type that reads it: fairseq's
// translation Transformer and Transformer-XL multiply the embedding by sqrt(dim) (a translation
// model without it trains worse, silently), AWD-LSTM does not. An explicit scale still wins.
TEST_CASE("token input: an embedding is scaled by sqrt(dim) by default in the Transformers, not in the LSTM LM",
          "[models]") {
  const auto model = [](const std::string& type, const std::string& input) {
    return Config::from_text(R"({"type": ")" + type + R"(", "d_model": 8, "input": )" + input + "}", "<test>");
  };
  const std::string plain = R"({"type": "embedding", "dim": 8})",
                    off = R"({"type": "embedding", "dim": 8, "scale": false})";
  CHECK(models::read_transformer_nmt_config(model("transformer_nmt", plain), 20).input.scale);
  CHECK(models::read_transformer_xl_config(model("transformer_xl", plain), 20).input.scale);
  CHECK_FALSE(models::read_lstm_lm_config(model("lstm_lm", plain), 20).input.scale);
  CHECK_FALSE(models::read_transformer_nmt_config(model("transformer_nmt", off), 20).input.scale);
  CHECK_FALSE(input_config(plain, 20).scale);  // read on its own: no model type, no scaling
}
