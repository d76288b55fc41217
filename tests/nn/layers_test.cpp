// The basic layers: exact parameter counts, initialisation (ranges, reproducibility from a seed),
// forward semantics, argument errors, and float64 gradient checks against central differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "nn/nn.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::random_leaf;
using define::test::values;


TEST_CASE("nn: parameter counts of every layer", "[nn]") {
  CHECK(Linear(400, 1150).num_parameters() == 461'150);
  CHECK(Linear(400, 1150, {.bias = false}).num_parameters() == 460'000);
  CHECK(Linear(400, 1150, {.init = LinearInit::KaimingUniform}).num_parameters() == 461'150);
  CHECK(Embedding(10000, 400).num_parameters() == 4'000'000);
  CHECK(LayerNorm(400).num_parameters() == 800);
  CHECK(LayerNorm(400, {.affine = false}).num_parameters() == 0);
  CHECK(Dropout(0.1).num_parameters() == 0);
  CHECK(LockedDropout(0.3).num_parameters() == 0);
  CHECK(EmbeddingDropout(0.1).num_parameters() == 0);
  CHECK(WeightDrop<Linear>(std::make_shared<Linear>(400, 1150), {"weight"}, 0.5).num_parameters() == 461'150);

  // 10000 * 128 table + 128 -> 400 projection (+ 400 bias).
  ProjectiveEmbedding pe(10000, 128, 400);
  CHECK(pe.num_parameters() == 1'331'200);
  CHECK(pe.parameter_breakdown() == std::vector<std::pair<std::string, std::int64_t>>{{"embedding", 1'280'000},
                                                                                      {"projection", 51'200}});
  CHECK(pe.named_parameters().keys() == std::vector<std::string>{"embedding.weight", "projection.weight"});
  ProjectiveEmbedding peb(10000, 128, 400, {.projection_bias = true});
  CHECK(peb.num_parameters() == 1'331'600);
  CHECK(peb.named_parameters().keys() ==
        std::vector<std::string>{"embedding.weight", "projection.weight", "projection.bias"});
}

TEST_CASE("nn: Linear initialisation and forward", "[nn]") {
  Generator g1(5), g2(5), g3(6);
  Linear a(30, 20, {}, g1), b(30, 20, {}, g2), c(30, 20, {}, g3);
  CHECK(values(a.weight()) == values(b.weight()));  // reproducible from the seed
  CHECK(values(a.weight()) != values(c.weight()));
  // Xavier: |w| <= sqrt(6 / (in + out)), spread over most of the range; bias 0.
  const double xavier = std::sqrt(6.0 / 50.0);
  CHECK(max_abs(a.weight()) <= xavier);
  CHECK(max_abs(a.weight()) > 0.9 * xavier);
  CHECK(max_abs(a.bias()) == 0.0);
  CHECK(a.weight().shape() == Shape{20, 30});
  CHECK(a.weight().requires_grad());
  // PyTorch-style: weight and bias within 1 / sqrt(in).
  Linear k(30, 20, {.init = LinearInit::KaimingUniform});
  CHECK(max_abs(k.weight()) <= 1.0 / std::sqrt(30.0));
  CHECK(max_abs(k.weight()) > 0.9 / std::sqrt(30.0));
  CHECK(max_abs(k.bias()) <= 1.0 / std::sqrt(30.0));
  CHECK(max_abs(k.bias()) > 0.0);
  CHECK_FALSE(Linear(3, 2, {.bias = false}).bias().defined());

  // y = x W^T + b on any leading dims.
  Linear lin(3, 2);
  {
    NoGradGuard g;
    copy_(lin.weight(), from_vector<float>({1, 2, 3, -1, 0, 1}, {2, 3}));
    copy_(lin.bias(), from_vector<float>({0.5, -0.5}));
  }
  const Tensor x = from_vector<float>({1, 1, 1, 2, 0, -1}, {1, 2, 3});
  const Tensor y = lin.forward(x);
  CHECK(y.shape() == Shape{1, 2, 2});
  CHECK(values(y) == std::vector<double>{6.5, -0.5, -0.5, -3.5});
  REQUIRE_THROWS_WITH(lin.forward(zeros({2, 4})), Contains("Linear: expected input [..., 3], got [2,4]"));
  REQUIRE_THROWS_WITH(Linear(0, 3), Contains("Linear: sizes must be positive"));
}

TEST_CASE("nn: Embedding initialisation, padding and forward", "[nn]") {
  Generator gen(3);
  Embedding e(1000, 64, {.padding_idx = 7}, gen);
  std::vector<double> w = values(e.weight());
  for (int j = 0; j < 64; ++j) CHECK(w[7 * 64 + j] == 0.0);  // padding row starts at zero
  double ss = 0;
  for (double v : w) ss += v * v;
  CHECK(std::sqrt(ss / double(w.size())) == Approx(1.0 / 8.0).epsilon(0.03));  // std dim^-0.5
  Embedding u(50, 8, {.init_range = 0.1});
  CHECK(max_abs(u.weight()) <= 0.1);
  Embedding s(500, 8, {.init_std = 1.0});
  CHECK(max_abs(s.weight()) > 2.0);

  const Tensor idx = from_vector<std::int64_t>({3, 7, 3, 0}, {2, 2});
  const Tensor y = e.forward(idx);
  CHECK(y.shape() == Shape{2, 2, 64});
  const std::vector<double> yv = values(y);
  for (int j = 0; j < 64; ++j) {
    CHECK(yv[j] == w[3 * 64 + j]);
    CHECK(yv[2 * 64 + j] == w[3 * 64 + j]);
    CHECK(yv[3 * 64 + j] == w[0 * 64 + j]);
  }
  backward(sum(y));
  const std::vector<double> g = values(e.weight().grad());
  CHECK(g[3 * 64] == 2.0);  // used twice
  CHECK(g[7 * 64] == 0.0);  // padding gets no gradient
  REQUIRE_THROWS_WITH(Embedding(10, 4, {.padding_idx = 10}), Contains("Embedding: padding_idx 10 out of range for 10 rows"));
  REQUIRE_THROWS_WITH(Embedding(10, 4, {.init_std = 1.0, .init_range = 0.1}), Contains("not both"));
}

TEST_CASE("nn: LayerNorm and Dropout forward", "[nn]") {
  LayerNorm ln(4);
  CHECK(values(ln.weight()) == std::vector<double>{1, 1, 1, 1});
  CHECK(values(ln.bias()) == std::vector<double>{0, 0, 0, 0});
  const std::vector<double> y = values(ln.forward(from_vector<float>({1, 2, 3, 4}, {1, 4})));
  CHECK(y[0] == Approx(-1.5 / std::sqrt(1.25 + 1e-5)).epsilon(1e-5));
  CHECK_FALSE(LayerNorm(4, {.affine = false}).weight().defined());
  REQUIRE_THROWS_WITH(ln.forward(zeros({2, 5})), Contains("LayerNorm: expected input [..., 4], got [2,5]"));

  Dropout d(0.25);
  Generator gen(9);
  d.set_generator(gen);
  const Tensor x = rand_uniform({2000}, 1, 2);
  const std::vector<double> xv = values(x), dv = values(d.forward(x));
  int dropped = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (dv[i] == 0.0) ++dropped;
    else CHECK(dv[i] == Approx(xv[i] / 0.75).epsilon(1e-6));
  }
  CHECK(dropped == Approx(500).margin(80));
  d.eval();
  CHECK(d.forward(x).impl() == x.impl());  // identity, not even a copy
  REQUIRE_THROWS_WITH(Dropout(1.5), Contains("Dropout: dropout probability 1.5 is outside [0, 1]"));
}

TEST_CASE("nn: float64 gradient checks of Linear, Embedding, LayerNorm, Dropout, ProjectiveEmbedding", "[nn]") {
  Generator gen(21);
  const auto input = [&](Shape s) { return random_leaf(s, gen); };
  SECTION("Linear") {
    Linear lin(5, 3, {}, gen);
    lin.to(DType::Float64);
    {
      NoGradGuard g;
      copy_(lin.bias(), from_vector<double>({0.1, -0.2, 0.3}));  // non-zero, so its use is visible
    }
    const Tensor x = input({2, 4, 5});
    check_gradients([&] { return lin.forward(x); }, {{"x", x}, {"weight", lin.weight()}, {"bias", lin.bias()}});
  }
  SECTION("Embedding with padding") {
    Embedding e(6, 3, {.padding_idx = 2}, gen);
    e.to(DType::Float64);
    // The padding row gets no gradient by design although the output reads it, so the indices
    // avoid it here (central differences would see it); the Embedding test checks it separately.
    const Tensor idx = from_vector<std::int64_t>({0, 4, 5, 5, 1, 3}, {3, 2});
    check_gradients([&] { return e.forward(idx); }, {{"weight", e.weight()}});
  }
  SECTION("LayerNorm") {
    LayerNorm ln(5);
    ln.to(DType::Float64);
    {
      NoGradGuard g;
      copy_(ln.weight(), rand_uniform({5}, 0.5, 1.5, {.dtype = DType::Float64}, gen));
      copy_(ln.bias(), rand_uniform({5}, -0.5, 0.5, {.dtype = DType::Float64}, gen));
    }
    const Tensor x = input({3, 5});
    check_gradients([&] { return ln.forward(x); }, {{"x", x}, {"weight", ln.weight()}, {"bias", ln.bias()}});
  }
  SECTION("Dropout with a fixed mask") {
    Dropout d(0.4);
    Generator dg(5);
    d.set_generator(dg);
    const Tensor x = input({4, 5});
    check_gradients([&] { dg.set_state({5, 0}); return d.forward(x); }, {{"x", x}});
  }
  SECTION("ProjectiveEmbedding with projection bias") {
    ProjectiveEmbedding pe(7, 3, 4, {.padding_idx = 0, .projection_bias = true}, gen);
    pe.to(DType::Float64);
    {
      NoGradGuard g;
      fill_(pe.projection()->bias(), 0.25);
    }
    const Tensor idx = from_vector<std::int64_t>({1, 2, 6, 1, 3}, {5});  // no padding index
    check_gradients([&] { return pe.forward(idx); }, {{"embedding.weight", pe.parameter("embedding.weight")},
                                                      {"projection.weight", pe.parameter("projection.weight")},
                                                      {"projection.bias", pe.parameter("projection.bias")}});
  }
}

TEST_CASE("nn: Sequential chains its modules", "[nn]") {
  Generator gen(2);
  auto seq = std::make_shared<Sequential>();
  auto l1 = seq->push_back(std::make_shared<Linear>(4, 6, LinearOptions{}, gen));
  auto ln = seq->push_back(std::make_shared<LayerNorm>(6));
  auto l2 = seq->push_back(std::make_shared<Linear>(6, 2, LinearOptions{}, gen));
  CHECK(seq->size() == 3);
  CHECK(seq->named_parameters().keys() ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
  const Tensor x = rand_uniform({3, 4}, -1, 1);
  CHECK(values(seq->forward(x)) == values(l2->forward(ln->forward(l1->forward(x)))));
}
