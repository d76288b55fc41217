// DefineUnit (the paper form of DeFINE, spec §11): the §11 parameter-count table, the released
// init's per-layer scale, reduce_skip, names and shapes of every variant, config errors
// (GroupedLinear's included), float64 gradient checks of every variant, dropout in eval mode, the
// emulated device and the fast CPU path against the reference. GroupedLinear alone: grouped_linear_layer_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "autograd/index.h"
#include "autograd/split_mix.h"
#include "nn/define_unit.h"
#include "nn/grouped_linear.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_close;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::random_leaf;
using define::test::randomise;
using define::test::values;
using define::test::with_parameters;

namespace {

using Ints = std::vector<std::int64_t>;

DefineConfig config(std::int64_t n, std::int64_t k, std::int64_t N, std::int64_t m, std::int64_t g_max,
                    const char* variant = "define") {
  return {.n = n, .k = k, .N = N, .m = m, .g_max = g_max, .variant = parse_define_variant(variant)};
}

}  // namespace

// The released init's bound per layer: the 3-d fans ((in/g)(out/g), out) where a layer has
// groups, a dense layer's (in, out) where it has one (the released code builds nn.Linear there).
TEST_CASE("define: initial weight scale of every layer under the released init", "[define]") {
  const auto check_layers = [](const DefineUnit& unit) {
    for (const auto& layer : unit.layers()) {
      const std::int64_t in = layer->in_features(), out = layer->out_features(), g = layer->groups();
      const double fan_in = g > 1 ? double(in / g) * double(out / g) : double(in);
      const double bound = std::sqrt(6.0 / (fan_in + double(out)));
      INFO("layer " << in << " -> " << out << " in " << g << " groups, bound " << bound);
      CHECK(max_abs(layer->weight()) <= bound);
      CHECK(max_abs(layer->weight()) > 0.9 * bound);
    }
  };
  Generator gen(4);
  // linear: every layer one group. The 3-d fans would give 64 -> 216 a bound of
  // sqrt(6 / (64 * 216 + 216)) = 0.021 instead of sqrt(6 / 280) = 0.146.
  const DefineUnit linear(config(64, 512, 3, 256, 8, "linear"), gen);
  check_layers(linear);
  CHECK(max_abs(linear.layers()[0]->weight()) > 0.13);
  // The AWD-LSTM DeFINE config (n 128, k 1024, N 7, g_max 64): only its last layer has one group.
  const DefineUnit awd(config(128, 1024, 7, 400, 64), gen);
  REQUIRE(awd.groups().back() == 1);
  check_layers(awd);
  // Per-group Xavier gives a one-group layer the same dense bound.
  DefineConfig xavier = config(64, 512, 3, 256, 8, "linear");
  xavier.init = GroupedLinearInit::Xavier;
  const DefineUnit linear_xavier(xavier, gen);
  check_layers(linear_xavier);
}

TEST_CASE("define: reduce_skip feeds [e, y_N] to the reduce", "[define]") {
  DefineConfig c = config(8, 32, 3, 6, 4);
  const DefineUnit plain(c);
  c.reduce_skip = true;
  Generator g1(7), g2(7);
  const DefineUnit skip(c, g1);
  CHECK(skip.parameter("reduce.weight").shape() == Shape{6, 8 + 32});
  CHECK(skip.num_parameters() == plain.num_parameters() + 8 * 6);  // n * m more weights
  CHECK(skip.out_features() == 6);
  // The same output as the reduce applied by hand to [e, y_N], y_N from the unit's own layers.
  const Tensor e = rand_uniform({3, 8}, -1, 1, {}, g2);
  Tensor y = skip.layers()[0]->forward(e);
  for (std::size_t l = 1; l < skip.layers().size(); ++l) y = skip.layers()[l]->forward(split_mix(e, y, skip.groups()[l]));
  const std::vector<double> by_hand = values(skip.reduce()->forward(concat({e, y}, -1)));
  const std::vector<double> got = values(skip.forward(e));
  check_close(got, by_hand, 1e-6, 0);
  c.variant = DefineVariant::NoReduce;
  REQUIRE_THROWS_WITH(DefineUnit(c), Contains("reduce_skip needs a reduce layer"));
}

TEST_CASE("define: the spec §11 parameter-count table", "[define]") {
  struct Row {
    DefineConfig cfg;
    Ints groups, widths;
    std::int64_t params;
  };
  DefineConfig no_norm = config(64, 512, 3, 256, 8);
  no_norm.norm = GroupedLinearNorm::None;
  const std::vector<Row> rows{
      {config(64, 512, 3, 256, 8, "define"), {8, 4, 2}, {216, 368, 512}, 271'254},
      {config(64, 512, 3, 256, 8, "define-nomix"), {8, 4, 2}, {216, 368, 512}, 271'254},
      {config(64, 512, 3, 256, 8, "hgt"), {8, 4, 2}, {216, 368, 512}, 248'982},
      {config(64, 512, 3, 256, 8, "glt"), {8, 8, 8}, {216, 368, 512}, 167'914},
      {config(64, 512, 3, 256, 8, "glt-shuffle"), {8, 8, 8}, {216, 368, 512}, 167'914},  // not in the table
      {config(64, 512, 3, 256, 8, "linear"), {1, 1, 1}, {216, 368, 512}, 416'344},
      {config(64, 512, 3, 256, 8, "define-residual"), {8, 4, 2}, {256, 256, 256}, 118'208},
      // The table lists 117,654 here, which is hgt without its reduce (checked below); the §11 rule
      // ("no reduce layer, the unit outputs y_N") on define keeps the mixer: 271,254 - 131,328.
      {config(64, 512, 3, 256, 8, "no-reduce"), {8, 4, 2}, {216, 368, 512}, 139'926},
      {no_norm, {8, 4, 2}, {216, 368, 512}, 270'504},
      {config(256, 1024, 3, 256, 32, "define"), {32, 16, 8}, {512, 768, 1024}, 437'120},
      {config(128, 1024, 7, 400, 64, "define"), {64, 32, 16, 8, 4, 2, 1}, {256, 384, 512, 640, 768, 896, 1024},
       2'088'208},
  };
  for (const Row& r : rows) {
    INFO(to_string(r.cfg.variant) << " n=" << r.cfg.n << " k=" << r.cfg.k << " N=" << r.cfg.N << " norm "
                                  << to_string(r.cfg.norm));
    const DefineUnit unit(r.cfg);
    CHECK(unit.groups() == r.groups);
    CHECK(unit.widths() == r.widths);
    CHECK(unit.num_parameters() == r.params);
    const DefineSchedule s = define_schedule(r.cfg);
    CHECK(s.groups == r.groups);
    CHECK(s.widths == r.widths);
  }
  // Where the table's no-reduce figure comes from: hgt's three layers alone.
  const DefineUnit hgt(config(64, 512, 3, 256, 8, "hgt"));
  CHECK(hgt.num_parameters() - hgt.reduce()->num_parameters() == 117'654);
}

TEST_CASE("define: DefineUnit names, input widths and forward shapes of every variant", "[define]") {
  const DefineUnit unit(config(8, 32, 3, 8, 4));
  CHECK(unit.named_parameters().keys() ==
        std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.0.norm.weight", "layers.0.norm.bias",
                                 "layers.1.weight", "layers.1.bias", "layers.1.norm.weight", "layers.1.norm.bias",
                                 "layers.2.weight", "layers.2.bias", "layers.2.norm.weight", "layers.2.norm.bias",
                                 "reduce.weight", "reduce.bias"});
  CHECK(unit.parameter("layers.1.weight").shape() == Shape{2, (8 + 16) / 2, 24 / 2});  // mixer input n + o_1
  CHECK(DefineUnit(config(8, 32, 3, 8, 4, "hgt")).parameter("layers.1.weight").shape() == Shape{2, 8, 12});
  CHECK(DefineUnit(config(8, 32, 3, 8, 4, "define-residual")).parameter("reduce.weight").shape() == Shape{8, 16});
  CHECK_FALSE(DefineUnit(config(8, 32, 3, 8, 4, "no-reduce")).has_parameter("reduce.weight"));

  for (const char* v : {"define", "define-nomix", "hgt", "glt", "glt-shuffle", "linear", "define-residual", "no-reduce"}) {
    INFO(v);
    CHECK(std::string(to_string(parse_define_variant(v))) == v);
    const DefineUnit u(config(8, 32, 3, 6, 4, v));
    const std::int64_t out = std::string(v) == "no-reduce" ? 32 : 6;
    CHECK(u.out_features() == out);
    CHECK(u.forward(zeros({2, 3, 8})).shape() == Shape{2, 3, out});
    CHECK(u.forward(zeros({8})).shape() == Shape{out});
  }
  REQUIRE_THROWS_WITH(unit.forward(zeros({2, 7})), Contains("DefineUnit: expected input [..., 8], got [2,7]"));

  // Same weights (same seed), different wiring: the mixer's interleaving is not a plain concat.
  Generator g1(2), g2(2), xg(3);
  const DefineUnit mix(config(8, 32, 3, 8, 4, "define"), g1), cat(config(8, 32, 3, 8, 4, "define-nomix"), g2);
  const Tensor x = rand_uniform({2, 8}, -1, 1, {}, xg);
  CHECK(values(mix.forward(x)) != values(cat.forward(x)));
}

TEST_CASE("define: configuration errors name the offending values", "[define]") {
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 512, 3, 256, 6)), Contains("DefineUnit: g_max must be a power of two, got 6"));
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 512, 3, 256, 0)), Contains("g_max must be a power of two, got 0"));
  REQUIRE_THROWS_WITH(DefineUnit(config(60, 512, 3, 256, 8)),
                      Contains("n = 60 must be divisible by the first layer's groups g_1 = 8"));
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 500, 1, 256, 8)),
                      Contains("k = 500 must be divisible by the last layer's groups g_N = 8"));
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 520, 3, 256, 16, "glt")),
                      Contains("k = 520 must be divisible by the last layer's groups g_N = 16"));
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 24, 3, 256, 8, "define-residual")),
                      Contains("define-residual needs k/2 divisible by g_1 = 8, got k = 24"));
  REQUIRE_THROWS_WITH(DefineUnit(config(64, 512, 0, 256, 8)), Contains("n, k, N and m must be positive"));
  REQUIRE_THROWS_WITH(parse_define_variant("define-mix"), Contains("DefineUnit: unknown variant 'define-mix'"));
  REQUIRE_THROWS_WITH(parse_activation("tanh"), Contains("unknown activation 'tanh'"));
  REQUIRE_THROWS_WITH(parse_grouped_linear_norm("batch"), Contains("unknown norm 'batch'"));
  REQUIRE_THROWS_WITH(GroupedLinear(10, 8, 4),
                      Contains("GroupedLinear: groups 4 must divide both in_features 10 and out_features 8"));
  REQUIRE_THROWS_WITH(GroupedLinear(8, 10, 4), Contains("in_features 8 and out_features 10"));
  REQUIRE_THROWS_WITH(GroupedLinear(8, 8, 2, {.dropout = 1.5}), Contains("dropout probability 1.5 is outside [0, 1]"));
  REQUIRE_THROWS_WITH(GroupedLinear(8, 8, 2).forward(zeros({3, 6})), Contains("GroupedLinear: expected input [..., 8], got [3,6]"));
}

TEST_CASE("define: float64 gradient checks of every variant w.r.t. input and parameters", "[define]") {
  Generator gen(11);
  const auto check_unit = [&](DefineConfig cfg) {
    DefineUnit unit(cfg, gen);
    unit.to(DType::Float64);
    randomise(unit, gen);
    Generator dg(5);
    unit.set_generator(dg);
    const Tensor x = random_leaf({3, cfg.n}, gen);
    const auto wrt = with_parameters(unit, {{"x", x}});
    // Same dropout mask on every evaluation.
    check_gradients([&] { dg.set_state({5, 0}); return unit.forward(x); }, wrt);
  };
  for (const char* v : {"define", "define-nomix", "hgt", "glt", "glt-shuffle", "linear", "define-residual", "no-reduce"}) {
    DYNAMIC_SECTION(v) { check_unit(config(8, 32, 3, 8, 4, v)); }
  }
  SECTION("define with reduce_skip and per-group Xavier init") {
    DefineConfig c = config(8, 32, 3, 8, 4);
    c.reduce_skip = true;
    c.init = GroupedLinearInit::Xavier;
    check_unit(c);
  }
  SECTION("define with gelu, no norm and dropout") {
    DefineConfig c = config(8, 32, 3, 8, 4);
    c.activation = Activation::Gelu;
    c.norm = GroupedLinearNorm::None;
    c.dropout = 0.3;
    check_unit(c);
  }
  SECTION("GroupedLinear with shuffle, norm and swish") {
    GroupedLinear g(6, 12, 3, {.shuffle = true, .norm = GroupedLinearNorm::Chunk, .activation = Activation::Swish}, gen);
    g.to(DType::Float64);
    randomise(g, gen);
    const Tensor x = random_leaf({2, 2, 6}, gen);
    check_gradients([&] { return g.forward(x); }, {{"x", x},
                                                   {"weight", g.weight()},
                                                   {"bias", g.bias()},
                                                   {"norm.weight", g.norm()->weight()},
                                                   {"norm.bias", g.norm()->bias()}});
  }
}

TEST_CASE("define: dropout is active in training and off (deterministic) in eval mode", "[define]") {
  Generator gen(4), dg(9);
  DefineConfig c = config(8, 32, 3, 8, 4);
  c.dropout = 0.5;
  DefineUnit unit(c, gen);
  unit.set_generator(dg);
  const Tensor x = rand_uniform({4, 8}, -1, 1, {}, gen);
  const std::vector<double> t1 = values(unit.forward(x)), t2 = values(unit.forward(x));
  CHECK(t1 != t2);  // fresh masks each call
  unit.eval();
  const std::vector<double> e1 = values(unit.forward(x)), e2 = values(unit.forward(x));
  CHECK(e1 == e2);
  CHECK(e1 != t1);
  // Eval output equals the same weights without dropout.
  Generator gen2(4);
  DefineUnit plain(config(8, 32, 3, 8, 4), gen2);
  CHECK(values(plain.forward(x)) == e1);
}

TEST_CASE("define: a unit on the emulated device matches the CPU", "[define]") {
  REQUIRE(kernels::register_devices().emu);
  for (const char* v : {"define", "glt-shuffle", "define-residual"}) {
    INFO(v);
    Generator gen(8);
    DefineConfig c = config(16, 64, 3, 24, 8, v);
    c.dropout = 0.2;
    DefineUnit unit(c, gen);
    randomise(unit, gen);
    Generator dg(3);
    unit.set_generator(dg);
    const Tensor x = rand_uniform({5, 2, 16}, -1, 1, {}, gen);
    dg.set_state({3, 0});
    const std::vector<double> cpu = values(unit.forward(x));
    unit.to(Device::emu());
    dg.set_state({3, 0});  // the same Philox masks on both devices
    const Tensor y = unit.forward(copy_to_device(x, Device::emu()));
    CHECK(y.device() == Device::emu());
    CHECK(define::test::compare(values(y), cpu, 1e-5, 1e-5).max_share <= 1.0);
  }
}

TEST_CASE("define: fast CPU path equals the reference at a training size (T = 700)", "[define]") {
  // The float64 gradient checks run small shapes; this one runs the sizes of the PTB config, where
  // the CPU kernels take their blocked / threaded paths, against the double-accumulating reference.
  Generator gen(9);
  DefineUnit unit(config(128, 512, 3, 256, 8), gen);
  const Tensor e = rand_normal({700, 128}, 0, 1, {}, gen).set_requires_grad();
  const Tensor u = rand_normal({700, 256}, 0, 1, {}, gen);
  auto run = [&](kernels::Backend b) {
    kernels::CpuBackendGuard guard(b);
    unit.zero_grad();
    e.set_grad(Tensor());
    const Tensor y = unit.forward(e);
    backward(sum(mul(y, u)));
    std::vector<std::vector<double>> out = {values(y), values(e.grad())};
    for (const auto& [name, p] : unit.named_parameters()) out.push_back(values(p.grad()));
    return out;
  };
  const auto fast = run(kernels::Backend::Cpu), ref = run(kernels::Backend::Ref);
  REQUIRE(fast.size() == ref.size());
  for (std::size_t i = 0; i < fast.size(); ++i) {
    double err = 0, scale = 0;
    for (std::size_t j = 0; j < fast[i].size(); ++j) {
      err = std::max(err, std::abs(fast[i][j] - ref[i][j]));
      scale = std::max(scale, std::abs(ref[i][j]));
    }
    INFO("tensor " << i << ": max abs err " << err << " of max " << scale);
    CHECK(err <= 1e-4 * scale + 1e-6);
  }
}
