// GroupedLinear (nn/grouped_linear.h), the grouped linear transform DeFINE and DExTra are built from: parameter
// counts and names, the released Xavier bound, init errors, and the forward checked by hand
// (group-major output, shuffle order, per-chunk LayerNorm with one shared affine pair).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "nn/grouped_linear.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_close;
using define::test::max_abs;
using define::test::values;

TEST_CASE("define: GroupedLinear parameters, names and the released Xavier bound", "[define]") {
  Generator gen(3);
  GroupedLinear glt(64, 216, 8, {.norm = GroupedLinearNorm::Chunk}, gen);
  CHECK(glt.num_parameters() == 64 * 216 / 8 + 216 + 2 * 27);  // 1,998
  CHECK(glt.named_parameters().keys() == std::vector<std::string>{"weight", "bias", "norm.weight", "norm.bias"});
  CHECK(glt.weight().shape() == Shape{8, 8, 27});
  CHECK(glt.bias().shape() == Shape{8, 27});
  CHECK(glt.norm()->weight().shape() == Shape{27});
  CHECK(max_abs(glt.bias()) == 0.0);
  // xavier_uniform_ on [g, in/g, out/g] as PyTorch computes its fans: sqrt(6 / (8 * 27 + 216)).
  const double bound = std::sqrt(6.0 / (8.0 * 27.0 + 216.0));
  CHECK(max_abs(glt.weight()) <= bound);
  CHECK(max_abs(glt.weight()) > 0.9 * bound);
  CHECK(GroupedLinear(64, 216, 8).num_parameters() == 64 * 27 + 216);
  CHECK(GroupedLinear(64, 216, 8, {.bias = false}).num_parameters() == 64 * 27);
  CHECK(GroupedLinear(6, 4, 1).weight().shape() == Shape{1, 6, 4});  // groups == 1: a dense layer

  // Per-group Xavier: each [8, 27] group as its own layer, sqrt(6 / (8 + 27)), about 3.4x wider.
  GroupedLinear xg(64, 216, 8, {.init = GroupedLinearInit::Xavier}, gen);
  const double group_bound = std::sqrt(6.0 / (8.0 + 27.0));
  CHECK(max_abs(xg.weight()) <= group_bound);
  CHECK(max_abs(xg.weight()) > 0.9 * group_bound);
  CHECK(parse_grouped_linear_init("xavier") == GroupedLinearInit::Xavier);
  CHECK(std::string(to_string(parse_grouped_linear_init("released"))) == "released");
  REQUIRE_THROWS_WITH(parse_grouped_linear_init("kaiming"), Contains("GroupedLinear: unknown init 'kaiming' (expected released or xavier)"));
}

TEST_CASE("define: GroupedLinear forward by hand: groups, shuffle order, shared per-chunk LayerNorm", "[define]") {
  // in 4, out 8, 2 groups: group i reads x[2i .. 2i+1] and writes 4 outputs.
  const std::vector<double> xv{1.0, -2.0, 0.5, 3.0};
  std::vector<double> w(2 * 2 * 4), b(2 * 4);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1 * double(i) - 0.7;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.05 * double(i);
  // y_i[j] = sum_c x[2i + c] W[i, c, j] + b[i, j]
  std::vector<double> a(4), bb(4);
  for (int j = 0; j < 4; ++j) {
    a[j] = xv[0] * w[0 * 8 + 0 * 4 + j] + xv[1] * w[0 * 8 + 1 * 4 + j] + b[j];
    bb[j] = xv[2] * w[1 * 8 + 0 * 4 + j] + xv[3] * w[1 * 8 + 1 * 4 + j] + b[4 + j];
  }
  const auto set = [&](GroupedLinear& g) {
    NoGradGuard ng;
    copy_(g.weight(), from_vector<double>(w, {2, 2, 4}));
    copy_(g.bias(), from_vector<double>(b, {2, 4}));
  };
  const Tensor x = from_vector<double>(xv, {1, 4});

  SECTION("plain: group-major [a0..a3 | b0..b3]") {
    GroupedLinear g(4, 8, 2);
    g.to(DType::Float64);
    set(g);
    check_close(values(g.forward(x)), {a[0], a[1], a[2], a[3], bb[0], bb[1], bb[2], bb[3]}, 1e-12, 1e-12);
  }
  SECTION("shuffle: [a0 b0 a1 b1 a2 b2 a3 b3]") {
    GroupedLinear g(4, 8, 2, {.shuffle = true});
    g.to(DType::Float64);
    set(g);
    check_close(values(g.forward(x)), {a[0], bb[0], a[1], bb[1], a[2], bb[2], a[3], bb[3]}, 1e-12, 1e-12);
  }
  // LayerNorm of each 4-wide row with the same gamma / beta, then the activation.
  const std::vector<double> gamma{1.5, 0.5, -1.0, 2.0}, beta{0.1, -0.2, 0.3, 0.0};
  const auto ln_row = [&](std::vector<double> r) {
    double mean = 0, var = 0;
    for (double v : r) mean += v / 4;
    for (double v : r) var += (v - mean) * (v - mean) / 4;
    for (int j = 0; j < 4; ++j) r[j] = (r[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
    return r;
  };
  const auto set_norm = [&](GroupedLinear& g) {
    NoGradGuard ng;
    copy_(g.norm()->weight(), from_vector<double>(gamma));
    copy_(g.norm()->bias(), from_vector<double>(beta));
  };
  SECTION("per-chunk LayerNorm shares one affine pair across the groups, then relu") {
    GroupedLinear g(4, 8, 2, {.norm = GroupedLinearNorm::Chunk, .activation = Activation::Relu});
    g.to(DType::Float64);
    set(g);
    set_norm(g);
    std::vector<double> want = ln_row(a), second = ln_row(bb);
    want.insert(want.end(), second.begin(), second.end());
    for (double& v : want) v = std::max(v, 0.0);
    check_close(values(g.forward(x)), want, 1e-12, 1e-12);
  }
  SECTION("with shuffle the normalised rows are the post-shuffle chunks") {
    GroupedLinear g(4, 8, 2, {.shuffle = true, .norm = GroupedLinearNorm::Chunk});
    g.to(DType::Float64);
    set(g);
    set_norm(g);
    std::vector<double> want = ln_row({a[0], bb[0], a[1], bb[1]}), second = ln_row({a[2], bb[2], a[3], bb[3]});
    want.insert(want.end(), second.begin(), second.end());
    check_close(values(g.forward(x)), want, 1e-12, 1e-12);
  }
}
