// DExTraEmb (the DExTra embedding, spec §2.6): parameter counts, map scaling, the padding row,
// locked map dropout, a shared map table, an adaptive input as the map layer, and a float64
// gradient check of the map table and the unit. The unit itself is in dextra_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "nn/adaptive.h"
#include "nn/dextra_embedding.h"
#include "nn/embedding.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::randomise;
using define::test::values;
using define::test::with_parameters;
using Vec = std::vector<double>;

TEST_CASE("dextra: DExTraEmb counts, map scaling, padding, locked dropout", "[nn][dextra]") {
  const DExTraEmbConfig ptb{.vocab = 10'000, .map_dim = 128, .padding_idx = 1, .out_dim = 400, .width_mult = 8.0,
                            .depth = 7, .max_groups = 8, .mode = DExTraMode::DefineIclr};
  Generator gen(2);
  {
    const DExTraEmb emb(ptb, gen);
    CHECK(emb.num_parameters() == 10'000 * 128 + 2'177'588);
    CHECK(emb.unit().config().p == 200);
    CHECK(emb.has_parameter("dextra.glts.6.weight"));
    CHECK(emb.map()->padding_idx() == 1);
    CHECK(max_abs(select(emb.map()->weight(), 0, 1)) == 0.0);
    // N(0, n^-0.5) rows: the sample std of 1.28 M draws is within 1% of 1/sqrt(128).
    const Vec w = values(emb.map()->weight());
    double ss = 0;
    for (double v : w) ss += v * v;
    CHECK(std::sqrt(ss / double(w.size())) == Approx(1.0 / std::sqrt(128.0)).epsilon(0.01));
  }

  // Tiny embedding: forward = unit(map[tokens] * sqrt(n)).
  DExTraEmbConfig tiny{.vocab = 7, .map_dim = 8, .padding_idx = 0, .out_dim = 8, .width_mult = 2.0, .depth = 3,
                       .max_groups = 2};
  DExTraEmb emb(tiny, gen);
  const Tensor tokens = from_vector(std::vector<std::int64_t>{3, 5, 3, 3, 6, 5}, Shape{3, 2});  // [T, B]
  const Tensor mapped = mul(embedding(emb.map()->weight(), tokens), std::sqrt(8.0));
  CHECK(values(emb.forward(tokens)) == values(emb.unit().forward(mapped)));
  CHECK(emb.forward(tokens).shape() == Shape{3, 2, 8});
  tiny.scale_embedding = false;
  Generator g2(2);
  DExTraEmb unscaled(tiny, g2);
  CHECK(values(unscaled.forward(tokens)) == values(unscaled.unit().forward(embedding(unscaled.map()->weight(), tokens))));

  // Locked dropout: one mask per (sequence, channel) for all time steps. Token 3 appears at t = 0
  // and t = 1 of sequence 0 and at t = 1 of sequence 1: equal rows within a sequence (the unit
  // itself has no dropout), different rows across sequences (different masks).
  tiny.scale_embedding = true;
  tiny.map_dropout = 0.5;
  DExTraEmb dropped(tiny, gen);
  const Tensor y = dropped.forward(tokens);
  const auto row = [&](std::int64_t t, std::int64_t b) { return values(select(select(y, 0, t), 0, b)); };
  CHECK(row(0, 0) == row(1, 0));
  CHECK(row(0, 0) != row(1, 1));
  dropped.eval();
  CHECK(values(dropped.forward(tokens)) == values(dropped.unit().forward(mul(embedding(dropped.map()->weight(), tokens), std::sqrt(8.0)))));

  REQUIRE_THROWS_WITH(emb.forward(from_vector(std::vector<std::int64_t>{1, 2})), Contains("DExTraEmb: expected tokens [T, B]"));
  DExTraEmbConfig odd = tiny;
  odd.out_dim = 7;
  REQUIRE_THROWS_WITH(DExTraEmb(odd), Contains("DExTraEmb: out_dim = 7 must be positive and even"));
  REQUIRE_THROWS_WITH(DExTraEmb(tiny, std::make_shared<Embedding>(9, 8)), Contains("shared map table is 9 x 8, config says 7 x 8"));
}

TEST_CASE("dextra: DExTraEmb with an adaptive input as the map layer", "[nn][dextra]") {
  Generator gen(6);
  auto adaptive = std::make_shared<AdaptiveInput>(
      AdaptiveInputConfig{.vocab = 12, .dim = 8, .cutoffs = {4, 8}, .factor = 2.0, .padding_idx = 1}, gen);
  const DExTraEmbConfig cfg{.vocab = 12, .map_dim = 8, .out_dim = 8, .width_mult = 2.0, .depth = 3, .max_groups = 2};
  const DExTraEmb emb(cfg, adaptive, gen);
  // The adaptive input scales its bands itself: no sqrt(n) outside; its padding row is used.
  const Tensor tokens = from_vector(std::vector<std::int64_t>{0, 5, 9, 11, 3, 7}, Shape{3, 2});
  CHECK(values(emb.forward(tokens)) == values(emb.unit().forward(adaptive->forward(tokens))));
  CHECK(emb.config().padding_idx == 1);
  CHECK_FALSE(emb.config().scale_embedding);
  CHECK(emb.map() == nullptr);
  CHECK(emb.num_parameters() == adaptive->num_parameters() + emb.unit().num_parameters());
  CHECK(emb.has_parameter("map.bands.2.weight"));
  DExTraEmbConfig wrong = cfg;
  wrong.vocab = 13;
  REQUIRE_THROWS_WITH(DExTraEmb(wrong, adaptive), Contains("DExTraEmb: adaptive input is 12 words x 8, config says 13 x 8"));
}

TEST_CASE("dextra: DExTraEmb float64 gradient check (map table and unit)", "[nn][dextra]") {
  Generator gen(13);
  DExTraEmb emb(DExTraEmbConfig{.vocab = 6, .map_dim = 4, .padding_idx = 0, .map_dropout = 0.3, .out_dim = 4,
                                .width_mult = 2.0, .depth = 3, .max_groups = 2, .dropout = 0.1},
                gen);
  emb.to(DType::Float64);
  randomise(emb, gen);
  Generator dg(7);
  emb.set_generator(dg);
  // No padding token (0): its row never gets a gradient, although the output depends on it.
  const Tensor tokens = from_vector(std::vector<std::int64_t>{1, 2, 4, 5, 2, 3}, Shape{3, 2});
  check_gradients([&] { dg.set_state({7, 0}); return emb.forward(tokens); }, with_parameters(emb));
}
