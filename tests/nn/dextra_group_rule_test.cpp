// DExTra's two group rules (nn/dextra.h, docs/spec.md §4.1): the released schedule (groups from 2,
// G a power of two) and the DeLighT paper's (groups from 1, G = ceil(d_m / 32)), and the width
// rounding a G that is not a power of two needs (a common multiple of neighbouring groups).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "models/registry.h"
#include "nn/delight_block.h"
#include "nn/dextra.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;

namespace {

using Ints = std::vector<std::int64_t>;

// Parameters of a dextra-mode unit computed from its schedule: dense input layer d_in -> p,
// layer l (a GLT with norm over out/g and one shared affine pair, or a dense layer with a full
// LayerNorm where g = 1), dense output layer (p + d_out) -> d_out with a LayerNorm.
std::int64_t unit_parameters(std::int64_t d_in, std::int64_t p, std::int64_t d_out, const Ints& groups,
                             const Ints& widths) {
  std::int64_t n = d_in * p + p + 2 * p;
  std::int64_t in = p;
  for (std::size_t l = 0; l < groups.size(); ++l) {
    const std::int64_t g = groups[l], out = widths[l];
    n += in * out / g + out + 2 * out / g;
    in = p + out;
  }
  return n + (p + d_out) * d_out + d_out + 2 * d_out;
}

}  // namespace

TEST_CASE("dextra: the released and the paper's G", "[nn][dextra]") {
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> rows{
      // d_m, released 2^ceil(log2(d_m // 32)), paper ceil(d_m / 32)
      {128, 4, 4}, {256, 8, 8}, {384, 16, 12}, {512, 16, 16}, {640, 32, 20}, {1024, 32, 32}, {32, 1, 1}, {40, 1, 2}};
  for (const auto& [d_m, released, paper] : rows) {
    INFO("d_m " << d_m);
    CHECK(dextra_max_groups(d_m, DExTraGroupRule::Released) == released);
    CHECK(dextra_max_groups(d_m, DExTraGroupRule::Paper) == paper);
  }
  CHECK(dextra_max_groups(16, DExTraGroupRule::Paper) == 1);
  REQUIRE_THROWS_WITH(dextra_max_groups(16, DExTraGroupRule::Released), Contains("d_m = 16 is below 32"));
  CHECK(parse_dextra_group_rule("paper") == DExTraGroupRule::Paper);
  CHECK(std::string(to_string(parse_dextra_group_rule("released"))) == "released");
  REQUIRE_THROWS_WITH(parse_dextra_group_rule("delight"), Contains("unknown group_rule 'delight' (expected released or paper)"));
}

TEST_CASE("dextra: group schedules of both rules at d_m = 512", "[nn][dextra]") {
  // The d_m = 512 block's DExTra: d_in 512, p = d_out = 256, w = 2, G = 16 under both rules.
  const auto groups = [](std::int64_t depth, DExTraGroupRule rule) {
    return dextra_schedule({.d_in = 512, .p = 256, .d_out = 256, .width_mult = 2.0, .depth = depth, .max_groups = 16,
                            .group_rule = rule})
        .groups;
  };
  CHECK(groups(4, DExTraGroupRule::Released) == Ints{2, 4, 4, 2});
  CHECK(groups(4, DExTraGroupRule::Paper) == Ints{1, 2, 2, 1});
  CHECK(groups(5, DExTraGroupRule::Released) == Ints{2, 4, 8, 4, 2});
  CHECK(groups(5, DExTraGroupRule::Paper) == Ints{1, 2, 4, 2, 1});
  CHECK(groups(12, DExTraGroupRule::Released) == Ints{2, 4, 8, 16, 16, 16, 16, 16, 16, 8, 4, 2});
  CHECK(groups(12, DExTraGroupRule::Paper) == Ints{1, 2, 4, 8, 16, 16, 16, 16, 8, 4, 2, 1});
  REQUIRE_THROWS_WITH(dextra_schedule({.d_in = 512, .p = 256, .d_out = 256, .depth = 4, .max_groups = 16,
                                       .mode = DExTraMode::DefineIclr, .group_rule = DExTraGroupRule::Paper}),
                      Contains("group_rule 'paper' applies to dextra mode"));
}

TEST_CASE("dextra: the paper's G = 12 at d_m = 384 rounds widths to common multiples of the groups", "[nn][dextra]") {
  // d_in 384, p = d_out = 192, w = 1.85 (d_max 710.4), N = 10: groups 1 2 4 8 12 | 12 8 4 2 1;
  // widths int(linspace(192, 710.4, 5)) = 192 321 451 580 710, mirrored, last dropped, each rounded up
  // to lcm(g_l, g_{l+1}, 8). Layer 4 sits between 8 and 12 groups: lcm 24 gives 600; a max() (12)
  // would give 588, which 8 groups cannot produce.
  const DExTraConfig cfg{.d_in = 384, .p = 192, .d_out = 192, .width_mult = 1.85, .depth = 10,
                         .max_groups = dextra_max_groups(384, DExTraGroupRule::Paper),
                         .group_rule = DExTraGroupRule::Paper};
  REQUIRE(cfg.max_groups == 12);
  const DExTraSchedule s = dextra_schedule(cfg);
  const Ints groups{1, 2, 4, 8, 12, 12, 8, 4, 2, 1};
  const Ints widths{192, 328, 456, 600, 720, 720, 584, 456, 328, 192};
  CHECK(s.groups == groups);
  CHECK(s.widths == widths);
  const DExTraUnit unit(cfg);
  CHECK(unit.num_parameters() == unit_parameters(384, 192, 192, groups, widths));
  CHECK(unit.forward(zeros({2, 3, 384})).shape() == Shape{2, 3, 192});
}

TEST_CASE("dextra: group_rule reaches DeLighT models and the dextra token input", "[nn][dextra]") {
  // A DeLighT LM at d_m = 384: the paper's rule gives every DExTra groups from 1 (G = 12), so the
  // first and last layer of each DExTra is dense, where the released rule (from 2, G = 16) groups
  // them: the paper's model is the larger one.
  const auto build = [](const char* rule) {
    const std::string json = std::string(R"({"type": "delight_lm", "d_m": 384, "map_dim": 192, "min_depth": 4,
      "max_depth": 8, "layers": 2, "width_mult": 2, "adaptive": false, "group_rule": ")") + rule + R"("})";
    Generator gen(1);
    return models::build_model(Config::from_text(json, "<test>"), 64, gen).module;
  };
  const auto released = build("released"), paper = build("paper");
  CHECK(paper->num_parameters() > released->num_parameters());
  // Layer 1 of the embedding's DExTra: 2 groups ([g, in/g, out/g]) against a dense [out, in].
  const std::string first = "embed.dextra.glts.0.weight";
  INFO(first);
  CHECK(released->parameter(first).dim() == 3);
  CHECK(paper->parameter(first).dim() == 2);
  REQUIRE_THROWS_WITH(build("newest"), Contains("unknown group_rule 'newest'"));
}
