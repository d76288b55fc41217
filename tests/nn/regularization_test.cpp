// LockedDropout, EmbeddingDropout and WeightDrop with fixed seeds: the shape of each mask (shared
// over time, whole rows, one per weight per call), the 1 / (1 - p) scaling, a fresh mask per
// forward, identity in eval mode, and float64 gradient checks.
#include <catch2/catch.hpp>

#include <cmath>

#include "nn/nn.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::random_leaf;
using define::test::values;

TEST_CASE("nn: LockedDropout shares one mask over time", "[nn]") {
  const std::int64_t T = 6, B = 3, H = 5;
  const double p = 0.5;
  LockedDropout ld(p);
  Generator gen(11);
  ld.set_generator(gen);
  const Tensor x = rand_uniform({T, B, H}, 1, 2);
  const std::vector<double> xv = values(x), y = values(ld.forward(x));
  int kept = 0, dropped = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      // The factor y / x at (b, h) is the same at every time step: 0 or 1 / (1 - p).
      const double m0 = y[b * H + h] / xv[b * H + h];
      CHECK((m0 == 0.0 || m0 == Approx(1.0 / (1.0 - p)).epsilon(1e-6)));
      (m0 == 0.0 ? dropped : kept)++;
      for (std::int64_t t = 1; t < T; ++t) {
        const std::int64_t i = (t * B + b) * H + h;
        CHECK(y[i] / xv[i] == Approx(m0).margin(1e-6));
      }
    }
  }
  CHECK(kept > 0);
  CHECK(dropped > 0);
  // A fresh mask per forward; the same one again from the same generator state.
  CHECK(values(ld.forward(x)) != y);
  gen.set_state({11, 0});
  CHECK(values(ld.forward(x)) == y);
  ld.eval();
  CHECK(ld.forward(x).impl() == x.impl());
  REQUIRE_THROWS_WITH(LockedDropout(0.5).forward(zeros({4})), Contains("LockedDropout: expected input [T, B, H], got [4]"));
  REQUIRE_THROWS_WITH(LockedDropout(-0.1), Contains("LockedDropout: dropout probability -0.1 is outside [0, 1]"));

  // Gradient in float64 with the mask held fixed.
  LockedDropout g64(0.3);
  Generator gg(4);
  g64.set_generator(gg);
  const Tensor x64 = random_leaf({4, 2, 3}, gen);
  check_gradients([&] { gg.set_state({4, 0}); return g64.forward(x64); }, {{"x", x64}});
}

TEST_CASE("nn: EmbeddingDropout drops whole rows of the table", "[nn]") {
  const double p = 0.4;
  Generator init(1), gen(8);
  Embedding emb(12, 5, {}, init);
  EmbeddingDropout ed(p);
  ed.set_generator(gen);
  const std::vector<double> w = values(emb.weight());

  const std::vector<double> d = values(ed.drop_rows(emb.weight()));
  std::vector<bool> row_kept(12);
  int kept = 0;
  for (int r = 0; r < 12; ++r) {
    row_kept[r] = d[r * 5] != 0.0;
    kept += row_kept[r];
    for (int j = 0; j < 5; ++j)  // a row is dropped entirely or kept entirely, scaled
      CHECK(d[r * 5 + j] == (row_kept[r] ? Approx(w[r * 5 + j] / (1 - p)).epsilon(1e-6) : Approx(0.0)));
  }
  CHECK(kept > 0);
  CHECK(kept < 12);

  // Through forward: every occurrence of a dropped word reads zeros, kept words the scaled row.
  const std::vector<std::int64_t> ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 3, 3, 7};
  const Tensor idx = from_vector<std::int64_t>(ids, {3, 5});
  gen.set_state({8, 0});
  const std::vector<double> y = values(ed.forward(emb, idx));
  for (std::size_t p_i = 0; p_i < ids.size(); ++p_i)
    for (int j = 0; j < 5; ++j) CHECK(y[p_i * 5 + j] == Approx(d[ids[p_i] * 5 + j]));
  CHECK(values(ed.forward(emb, idx)) != y);                    // a fresh mask per forward
  CHECK(emb.weight().requires_grad());                         // the module's own weight is back
  CHECK(emb.parameter("weight").impl() == emb.weight().impl());
  ed.eval();
  CHECK(values(ed.forward(emb, idx)) == values(emb.forward(idx)));

  // The same for a nested table: ProjectiveEmbedding's "embedding.weight". Dropped words give the
  // projection of a zero row, i.e. zeros without a bias.
  ProjectiveEmbedding pe(12, 4, 6, {}, init);
  ed.train();
  gen.set_state({8, 0});
  const std::vector<double> py = values(ed.forward(pe, idx, "embedding.weight"));
  for (std::size_t p_i = 0; p_i < ids.size(); ++p_i)
    if (!row_kept[ids[p_i]])
      for (int j = 0; j < 6; ++j) CHECK(py[p_i * 6 + j] == 0.0);
  REQUIRE_THROWS_WITH(ed.forward(pe, idx), Contains("EmbeddingDropout: ProjectiveEmbedding has no parameter 'weight'"));

  // Gradient in float64 with the row mask held fixed: dropped rows get zero gradient.
  Embedding e64(6, 3, {}, init);
  e64.to(DType::Float64);
  EmbeddingDropout ed64(0.5);
  Generator g64(3);
  ed64.set_generator(g64);
  const Tensor idx64 = from_vector<std::int64_t>({0, 1, 2, 3, 4, 5, 1}, {7});
  check_gradients([&] { g64.set_state({3, 0}); return ed64.forward(e64, idx64); }, {{"weight", e64.weight()}});
}

namespace {
// Applies one Linear twice per call, like a recurrent layer's weight used at two time steps.
struct TwoSteps : Module {
  std::shared_ptr<Linear> cell;
  explicit TwoSteps(Generator& gen) : Module("TwoSteps") {
    cell = register_module("cell", std::make_shared<Linear>(4, 4, LinearOptions{}, gen));
  }
  Tensor forward(const Tensor& x) { return stack({cell->forward(x), cell->forward(x)}, 0); }
};
}  // namespace

TEST_CASE("nn: WeightDrop applies DropConnect to a wrapped module's weight", "[nn]") {
  const double p = 0.5;
  Generator init(2), gen(13);
  auto lin = std::make_shared<Linear>(6, 5, LinearOptions{}, init);
  {
    NoGradGuard g;
    fill_(lin->bias(), 0.25);
  }
  auto wd = weight_drop(lin, {"weight"}, p);
  wd->set_generator(gen);
  CHECK(wd->named_parameters().keys() == std::vector<std::string>{"module.weight", "module.bias"});
  const Tensor raw = lin->weight();
  const std::vector<double> w = values(raw);

  // x = I: row i of y is column i of the dropped weight plus the bias.
  const Tensor eye = from_vector<float>({1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
                                          0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1},
                                         {6, 6});
  const std::vector<double> y = values(wd->forward(eye));
  int kept = 0, dropped = 0;
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 6; ++i) {
      const double wd_oi = y[i * 5 + o] - 0.25;  // dropped weight [o, i]
      if (std::abs(wd_oi) < 1e-7) ++dropped;
      else {
        CHECK(wd_oi == Approx(w[o * 6 + i] / (1 - p)).epsilon(1e-5));
        ++kept;
      }
    }
  CHECK(kept > 0);
  CHECK(dropped > 0);
  CHECK(lin->weight().impl() == raw.impl());  // the leaf is back in place after the call
  CHECK(values(wd->forward(eye)) != y);       // one fresh mask per call
  gen.set_state({13, 0});
  CHECK(values(wd->forward(eye)) == y);       // reproducible from the seed
  wd->eval();
  CHECK(values(wd->forward(eye)) == values(lin->forward(eye)));

  REQUIRE_THROWS_WITH(weight_drop(std::make_shared<Linear>(2, 2), {"weight_hh"}, 0.5),
                      Contains("WeightDrop: Linear has no parameter 'weight_hh'"));
  REQUIRE_THROWS_WITH(weight_drop(std::make_shared<Linear>(2, 2), {"weight"}, 2.0), Contains("outside [0, 1]"));
}

TEST_CASE("nn: WeightDrop uses one mask for every step of a call", "[nn]") {
  Generator init(4), gen(6);
  auto steps = std::make_shared<TwoSteps>(init);
  auto wd = weight_drop(steps, {"cell.weight"}, 0.5);  // a weight of a descendant, by dotted name
  wd->set_generator(gen);
  CHECK(wd->named_parameters().keys() == std::vector<std::string>{"module.cell.weight", "module.cell.bias"});
  const Tensor x = rand_uniform({3, 4}, -1, 1, {}, init);
  const Tensor y = wd->forward(x);
  CHECK(values(select(y, 0, 0)) == values(select(y, 0, 1)));
  CHECK(values(select(y, 0, 0)) != values(steps->cell->forward(x)));

  // Gradient in float64 with the mask held fixed, to the raw weight, the bias and the input.
  wd->to(DType::Float64);
  const Tensor x64 = random_leaf({3, 4}, init);
  check_gradients([&] { gen.set_state({6, 0}); return wd->forward(x64); },
                  {{"x", x64}, {"module.cell.weight", wd->parameter("module.cell.weight")},
                   {"module.cell.bias", wd->parameter("module.cell.bias")}});
}
