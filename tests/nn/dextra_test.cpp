// DExTraUnit (the released DExTra / DeFINE unit, spec §2): the worked examples of §2.3 and §2.4
// row by row (numbers typed in from the spec, never computed by the code under test), the group
// schedules, the §9 configuration error, the wiring checked against a hand-written reference
// forward (input layer, GLTs, shuffle, mixer, output layer), float64 gradient checks of both
// modes, and the emulated device against the CPU. DExTraEmb is in dextra_embedding_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/dextra.h"
#include "nn/dextra_embedding.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::random_leaf;
using define::test::randomise;
using define::test::values;
using define::test::with_parameters;

namespace {

using Ints = std::vector<std::int64_t>;
using Vec = std::vector<double>;

DExTraConfig unit_config(std::int64_t d_in, std::int64_t p, std::int64_t d_out, double w, std::int64_t N,
                         std::int64_t G, const char* mode) {
  return {.d_in = d_in, .p = p, .d_out = d_out, .width_mult = w, .depth = N, .max_groups = G,
          .mode = parse_dextra_mode(mode)};
}

// ---- a reference forward of the released unit for one token vector, in plain loops.

// Per-chunk LayerNorm (rows of `chunk` features, one shared gamma/beta), then swish.
Vec norm_act(Vec y, std::int64_t chunk, const Vec& gamma, const Vec& beta) {
  for (std::size_t r = 0; r < y.size(); r += chunk) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < chunk; ++j) mean += y[r + j] / double(chunk);
    for (std::int64_t j = 0; j < chunk; ++j) var += (y[r + j] - mean) * (y[r + j] - mean) / double(chunk);
    for (std::int64_t j = 0; j < chunk; ++j) {
      const double v = (y[r + j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
      y[r + j] = v / (1.0 + std::exp(-v));
    }
  }
  return y;
}

// Layer `prefix` of `unit` applied to x: dense ([out, in] weight) or grouped ([g, in/g, out/g]),
// transpose shuffle when asked, then norm and swish.
Vec ref_layer(const DExTraUnit& unit, const std::string& prefix, const Vec& x, std::int64_t g, bool shuffle) {
  const Vec w = values(unit.parameter(prefix + ".weight")), b = values(unit.parameter(prefix + ".bias"));
  const std::int64_t in = std::int64_t(x.size()), out = std::int64_t(b.size()), kin = in / g, kout = out / g;
  Vec y(out);
  for (std::int64_t i = 0; i < g; ++i)
    for (std::int64_t j = 0; j < kout; ++j) {
      double s = b[i * kout + j];
      for (std::int64_t c = 0; c < kin; ++c)
        s += x[i * kin + c] * (g == 1 ? w[j * in + c] : w[(i * kin + c) * kout + j]);
      y[i * kout + j] = s;
    }
  if (shuffle && g > 1) {
    Vec z(out);
    for (std::int64_t f = 0; f < out; ++f) z[f] = y[(f % g) * kout + f / g];  // z[f] = y_{f mod g}[f / g]
    y = z;
  }
  return norm_act(y, kout, values(unit.parameter(prefix + ".norm.weight")),
                  values(unit.parameter(prefix + ".norm.bias")));
}

// [X^1, Y^1, X^2, Y^2, ...] with g chunks of each.
Vec ref_mix(const Vec& X, const Vec& Y, std::int64_t g) {
  Vec out;
  const std::size_t px = X.size() / g, py = Y.size() / g;
  for (std::int64_t c = 0; c < g; ++c) {
    out.insert(out.end(), X.begin() + c * px, X.begin() + (c + 1) * px);
    out.insert(out.end(), Y.begin() + c * py, Y.begin() + (c + 1) * py);
  }
  return out;
}

Vec ref_unit(const DExTraUnit& unit, const Vec& x, const Ints& groups, bool shuffle) {
  const Vec X = ref_layer(unit, "input_layer", x, 1, false);
  Vec y = ref_layer(unit, "glts.0", X, groups[0], shuffle);
  for (std::size_t l = 1; l < groups.size(); ++l)
    y = ref_layer(unit, "glts." + std::to_string(l), ref_mix(X, y, groups[l]), groups[l], shuffle);
  return ref_layer(unit, "output_layer", ref_mix(X, y, 1), 1, false);
}

std::int64_t params_of(const Module& m, const std::string& path) { return m.submodule(path).num_parameters(); }

}  // namespace

TEST_CASE("dextra: §2.3 worked example, define-iclr as the PTB embedding unit (n=128, k=1024, N=7, m=400)",
          "[nn][dextra]") {
  // DExTraEmb gives d_in = 128, p = m/2 = 200, d_out = 400, w = k/n = 8; G = 8.
  DExTraUnit unit(unit_config(128, 200, 400, 8.0, 7, 8, "define-iclr"));
  CHECK(unit.groups() == Ints{4, 2, 1, 8, 4, 2, 1});
  CHECK(unit.widths() == Ints{344, 480, 616, 752, 888, 1024, 400});
  CHECK(unit.schedule().inputs == Ints{200, 544, 680, 816, 952, 1088, 1224});
  CHECK(unit.schedule().d_max == 1024.0);
  // The table, row by row.
  CHECK(params_of(unit, "input_layer") == 26'200);  // 128*200 + 200 + 400
  const Ints rows{17'716, 131'520, 420'728, 77'644, 212'676, 559'104, 490'800};
  for (std::size_t l = 0; l < rows.size(); ++l) {
    INFO("GLT" << l + 1);
    CHECK(params_of(unit, "glts." + std::to_string(l)) == rows[l]);
  }
  CHECK(params_of(unit, "output_layer") == 241'200);
  CHECK(unit.num_parameters() == 2'177'588);
  // G = 4: groups [1,4,2,1,4,2,1], same widths (the rounding unit is 8 either way).
  const DExTraUnit g4(unit_config(128, 200, 400, 8.0, 7, 4, "define-iclr"));
  CHECK(g4.groups() == Ints{1, 4, 2, 1, 4, 2, 1});
  CHECK(g4.widths() == Ints{344, 480, 616, 752, 888, 1024, 400});
  CHECK(g4.num_parameters() == 2'492'372);
  // In define-iclr mode no GLT shuffles, and a one-group layer is a dense [out, in] matrix.
  CHECK(unit.parameter("glts.2.weight").shape() == Shape{616, 680});
  CHECK(unit.parameter("glts.0.weight").shape() == Shape{4, 50, 86});
  CHECK_FALSE(unit.submodule_as<GroupedLinear>("glts.0").options().shuffle);
}

TEST_CASE("dextra: define-iclr group schedules of §2.3 step 1", "[nn][dextra]") {
  // p = 256 so every schedule below is valid; groups do not depend on widths.
  const auto groups = [](std::int64_t N, std::int64_t G) {
    return dextra_schedule(unit_config(128, 256, 256, 8.0, N, G, "define-iclr")).groups;
  };
  CHECK(groups(7, 4) == Ints{1, 4, 2, 1, 4, 2, 1});
  CHECK(groups(7, 8) == Ints{4, 2, 1, 8, 4, 2, 1});
  CHECK(groups(7, 16) == Ints{2, 1, 16, 8, 4, 2, 1});
  CHECK(groups(7, 64) == Ints{64, 32, 16, 8, 4, 2, 1});  // 2^(N-1) <= G: [2^(N-1), .., 2, 1]
  CHECK(groups(3, 32) == Ints{4, 2, 1});                  // not G: the first layer gets 2^(N-1)
  CHECK(groups(2, 1) == Ints{1, 1});
}

TEST_CASE("dextra: §9 — define-iclr with G >= 16 and p = 200 is a configuration error", "[nn][dextra]") {
  // Groups [2,1,16,8,4,2,1]: the mixer of layer 3 cannot cut X (200 features) into 16 chunks. The
  // released code dies in the GLT constructor; here it is a clear error naming both values.
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(128, 200, 400, 8.0, 7, 16, "define-iclr")),
                      Contains("DExTraUnit: p = 200 is not divisible by g_3 = 16"));
  // G = 32: groups [1,32,16,8,4,2,1], so layer 2 is the first that cannot split X.
  REQUIRE_THROWS_WITH(dextra_schedule(unit_config(128, 200, 400, 8.0, 7, 32, "define-iclr")),
                      Contains("DExTraUnit: p = 200 is not divisible by g_2 = 32"));
  REQUIRE_THROWS_WITH(DExTraEmb(DExTraEmbConfig{.vocab = 10, .map_dim = 128, .out_dim = 400, .width_mult = 8.0,
                                                .depth = 7, .max_groups = 16, .mode = DExTraMode::DefineIclr}),
                      Contains("p = 200 is not divisible by g_3 = 16"));
}

TEST_CASE("dextra: §2.4 worked examples, DeLighT block DExTras at d_m = 512", "[nn][dextra]") {
  SECTION("encoder block 0: N = 4, w = 2, G = 16") {
    DExTraUnit unit(unit_config(512, 256, 256, 2.0, 4, 16, "dextra"));
    CHECK(unit.groups() == Ints{2, 4, 4, 2});
    CHECK(unit.widths() == Ints{256, 1024, 1024, 256});
    CHECK(unit.schedule().inputs == Ints{256, 512, 1280, 1280});
    CHECK(params_of(unit, "input_layer") == 131'840);
    CHECK(params_of(unit, "glts.0") == 33'280);
    CHECK(params_of(unit, "glts.1") == 132'608);
    CHECK(params_of(unit, "glts.2") == 329'216);
    CHECK(params_of(unit, "glts.3") == 164'352);
    CHECK(params_of(unit, "output_layer") == 131'840);
    CHECK(unit.num_parameters() == 923'136);
    CHECK(unit.submodule_as<GroupedLinear>("glts.1").options().shuffle);  // dextra mode shuffles
  }
  SECTION("N = 7, w = 2.857 (block 6 of 8): asymmetric rounding 1072 vs 1064") {
    const DExTraUnit unit(unit_config(512, 256, 256, 2.857, 7, 16, "dextra"));
    CHECK(unit.groups() == Ints{2, 4, 8, 16, 8, 4, 2});
    CHECK(unit.widths() == Ints{256, 664, 1072, 1472, 1064, 664, 256});
    CHECK(unit.num_parameters() == 1'200'942);
  }
  SECTION("dextra group rule: starts at 2, capped by G, odd N mirrors without repeating the peak") {
    const auto groups = [](std::int64_t N, std::int64_t G) {
      return dextra_schedule(unit_config(512, 256, 256, 2.0, N, G, "dextra")).groups;
    };
    CHECK(groups(7, 16) == Ints{2, 4, 8, 16, 8, 4, 2});
    CHECK(groups(8, 4) == Ints{2, 4, 4, 4, 4, 4, 4, 2});
    CHECK(groups(2, 16) == Ints{2, 2});
    CHECK(groups(3, 1) == Ints{1, 1, 1});
  }
  SECTION("numpy linspace arithmetic") {
    CHECK(linspace_int(256, 512 * 2.857, 4) == Ints{256, 658, 1060, 1462});
    CHECK(linspace_int(200, 1024, 7) == Ints{200, 337, 474, 612, 749, 886, 1024});
    CHECK(linspace_int(5, 9, 1) == Ints{5});
  }
}

TEST_CASE("dextra: names, shapes, configuration errors", "[nn][dextra]") {
  const DExTraUnit unit(unit_config(8, 4, 4, 2.0, 3, 4, "dextra"));
  CHECK(unit.groups() == Ints{2, 4, 2});
  CHECK(unit.widths() == Ints{8, 16, 4});
  CHECK(unit.named_parameters().keys() ==
        std::vector<std::string>{"input_layer.weight", "input_layer.bias", "input_layer.norm.weight",
                                 "input_layer.norm.bias", "glts.0.weight", "glts.0.bias", "glts.0.norm.weight",
                                 "glts.0.norm.bias", "glts.1.weight", "glts.1.bias", "glts.1.norm.weight",
                                 "glts.1.norm.bias", "glts.2.weight", "glts.2.bias", "glts.2.norm.weight",
                                 "glts.2.norm.bias", "output_layer.weight", "output_layer.bias",
                                 "output_layer.norm.weight", "output_layer.norm.bias"});
  CHECK(unit.parameter("input_layer.weight").shape() == Shape{4, 8});
  CHECK(unit.parameter("glts.1.weight").shape() == Shape{4, 3, 4});  // (p + 8) / 4 -> 16 / 4
  CHECK(unit.parameter("glts.1.norm.weight").shape() == Shape{4});    // chunk of 16 / 4
  CHECK(unit.parameter("output_layer.weight").shape() == Shape{4, 8});
  CHECK(unit.forward(zeros({3, 2, 8})).shape() == Shape{3, 2, 4});
  CHECK(unit.forward(zeros({8})).shape() == Shape{4});
  // Without norm: no LN parameters anywhere.
  DExTraConfig none = unit_config(8, 4, 4, 2.0, 3, 4, "dextra");
  none.norm = GroupedLinearNorm::None;
  // 8*4+4 | 4*8/2+8 | 12*16/4+16 | 20*4/2+4 | 8*4+4
  CHECK(DExTraUnit(none).num_parameters() == 36 + 24 + 64 + 44 + 36);
  CHECK(std::string(to_string(parse_dextra_mode("define-iclr"))) == "define-iclr");
  CHECK(std::string(to_string(parse_dextra_mode("dextra"))) == "dextra");

  REQUIRE_THROWS_WITH(parse_dextra_mode("define"), Contains("DExTraUnit: unknown mode 'define'"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(8, 4, 4, 2.0, 1, 4, "dextra")), Contains("depth N = 1 must be at least 2"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(9, 4, 4, 2.0, 3, 1, "dextra")), Contains("d_in = 9 must be even"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(12, 4, 4, 2.0, 3, 8, "dextra")),
                      Contains("d_in = 12 is not divisible by max_groups G = 8"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(8, 6, 4, 2.0, 3, 4, "dextra")), Contains("p = 6 is not divisible by g_2 = 4"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(8, 4, 5, 2.0, 3, 4, "dextra")), Contains("d_out = 5 is not divisible by g_3 = 2"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(8, 0, 4, 2.0, 3, 4, "dextra")), Contains("must be positive"));
  REQUIRE_THROWS_WITH(DExTraUnit(unit_config(8, 4, 4, 0.0, 3, 4, "dextra")), Contains("width_mult w = 0 must be positive"));
  REQUIRE_THROWS_WITH(unit.forward(zeros({2, 6})), Contains("DExTraUnit: expected input [..., 8], got [2,6]"));
}

TEST_CASE("dextra: forward equals a hand-written reference of the released wiring", "[nn][dextra]") {
  const auto check = [](const DExTraConfig& cfg, const Ints& groups, bool shuffle) {
    Generator gen(21);
    DExTraUnit unit(cfg, gen);
    unit.to(DType::Float64);
    randomise(unit, gen);
    REQUIRE(unit.groups() == groups);
    const Tensor x = rand_uniform({2, cfg.d_in}, -1, 1, {.dtype = DType::Float64}, gen);
    const Vec got = values(unit.forward(x)), xs = values(x);
    for (std::int64_t r = 0; r < 2; ++r) {
      const Vec want = ref_unit(unit, Vec(xs.begin() + r * cfg.d_in, xs.begin() + (r + 1) * cfg.d_in), groups, shuffle);
      REQUIRE(want.size() == std::size_t(cfg.d_out));
      for (std::int64_t j = 0; j < cfg.d_out; ++j) CHECK(got[r * cfg.d_out + j] == Approx(want[j]).margin(1e-12));
    }
  };
  SECTION("dextra: groups [2,4,2], shuffled GLTs") { check(unit_config(8, 4, 4, 2.0, 3, 4, "dextra"), {2, 4, 2}, true); }
  SECTION("dextra without shuffle (--no-glt-shuffle)") {
    DExTraConfig c = unit_config(8, 4, 4, 2.0, 3, 4, "dextra");
    c.shuffle = false;
    check(c, {2, 4, 2}, false);
  }
  SECTION("define-iclr: groups [4,2,1], never shuffled") {
    check(unit_config(8, 4, 4, 2.0, 3, 4, "define-iclr"), {4, 2, 1}, false);
  }
}

TEST_CASE("dextra: float64 gradient checks of both modes", "[nn][dextra]") {
  Generator gen(11);
  const auto check_unit = [&](DExTraConfig cfg) {
    DExTraUnit unit(cfg, gen);
    unit.to(DType::Float64);
    randomise(unit, gen);
    Generator dg(5);
    unit.set_generator(dg);
    const Tensor x = random_leaf({3, cfg.d_in}, gen);
    const auto wrt = with_parameters(unit, {{"x", x}});
    check_gradients([&] { dg.set_state({5, 0}); return unit.forward(x); }, wrt);  // same masks each time
  };
  SECTION("dextra, swish, chunk LN, dropout") {
    DExTraConfig c = unit_config(8, 4, 4, 2.0, 4, 4, "dextra");
    c.dropout = 0.2;
    check_unit(c);
  }
  SECTION("define-iclr, gelu, no norm") {
    DExTraConfig c = unit_config(8, 4, 4, 2.0, 3, 4, "define-iclr");
    c.activation = Activation::Gelu;
    c.norm = GroupedLinearNorm::None;
    check_unit(c);
  }
  SECTION("define-iclr, relu, chunk LN") {
    DExTraConfig c = unit_config(8, 4, 4, 2.0, 4, 2, "define-iclr");
    c.activation = Activation::Relu;
    check_unit(c);
  }
}

TEST_CASE("dextra: a unit on the emulated device matches the CPU", "[nn][dextra]") {
  REQUIRE(kernels::register_devices().emu);
  for (const char* mode : {"dextra", "define-iclr"}) {
    INFO(mode);
    Generator gen(8);
    DExTraConfig c = unit_config(16, 8, 16, 2.0, 4, 4, mode);
    c.dropout = 0.2;
    DExTraUnit unit(c, gen);
    randomise(unit, gen);
    Generator dg(3);
    unit.set_generator(dg);
    const Tensor x = rand_uniform({5, 2, 16}, -1, 1, {}, gen);
    dg.set_state({3, 0});
    const Vec cpu = values(unit.forward(x));
    unit.to(Device::emu());
    dg.set_state({3, 0});  // the same Philox masks on both devices
    const Tensor y = unit.forward(copy_to_device(x, Device::emu()));
    CHECK(y.device() == Device::emu());
    CHECK(define::test::compare(values(y), cpu, 1e-5, 1e-5).max_share <= 1.0);
  }
}
