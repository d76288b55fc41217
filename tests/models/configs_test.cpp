// The shipped configs/ build through the model registry into the models the papers count, and
// `define params` splits them as the papers do. (The full-size DeLighT d_m = 384..640 and WT-103
// models are counted from their config structs in tests/models/delight_test.cpp; building them
// again from files here would only repeat seconds of allocation.)
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/config.h"
#include "models/delight_nmt.h"
#include "models/registry.h"
#include "nn/init.h"

using namespace define;
using namespace define::models;

namespace {

// vocab: the data's vocabulary size, for configs that take it from the corpus (0: from the config).
std::vector<ParameterPart> parts_of(const std::string& name, std::int64_t vocab = 0) {
  const Config cfg = Config::from_file(std::string(DEFINE_SOURCE_DIR) + "/configs/" + name);
  const nn::init::ShapesOnlyGuard shapes_only;  // counts need shapes, not drawn values
  Generator gen(0);
  const BuiltModel m = build_model(cfg.section("model"), vocab, gen);
  cfg.section("model").require_all_used();
  return count_parameter_parts(*m.module, m.parts);
}

std::int64_t total(const std::vector<ParameterPart>& parts) {
  std::int64_t n = 0;
  for (const auto& p : parts) n += p.count;
  return n;
}

}  // namespace

TEST_CASE("configs: AWD-LSTM and DeFINE AWD-LSTM on PTB", "[models][configs]") {
  const auto awd = parts_of("awd-lstm-ptb.json");
  CHECK(total(awd) == 24221600);
  REQUIRE(awd.size() == 2);
  CHECK(awd[0].name == kPartContext);
  CHECK(awd[0].count == 20211600);

  // DeFINE paper form (spec 11 last row) and the released define-iclr form (spec 2.3), both on the
  // 19,673,760-parameter LSTM with a 128-d tied table (spec 5.3).
  const auto paper = parts_of("define-awd-lstm-ptb.json");
  CHECK(paper[0].name == kPartDefine);
  CHECK(paper[0].count == 2088208);
  CHECK(total(paper) == 19673760 + 2088208);
  const auto released = parts_of("define-iclr-awd-lstm-ptb.json");
  CHECK(released[0].count == 2177588);
  CHECK(total(released) == 19673760 + 2177588);
}

TEST_CASE("configs: the PTB comparison (DeFINE 3.53 M, standard 3.58 M and 7.34 M)", "[models][configs]") {
  // What the README's comparison table reports, with PTB's 10,000 words.
  const auto define = parts_of("ptb-define-lstm.json", 10000);
  REQUIRE(define.size() == 3);
  CHECK(define[0].name == kPartDefine);
  CHECK(define[0].count == 337280);
  CHECK(total(define) == 3532944);
  CHECK(total(parts_of("ptb-lstm-small.json", 10000)) == 3575952);     // 170-d table, LSTM 512 / 170
  CHECK(total(parts_of("ptb-lstm-baseline.json", 10000)) == 7344272);  // 400-d table, LSTM 512 / 400
  CHECK(total(parts_of("ptb-lstm-long.json", 10000)) == 7344272);
}

TEST_CASE("configs: the WikiText-2 LSTM comparison (DeFINE, standard, adaptive at 6.53-6.55 M)", "[models][configs]") {
  // Issue 17's table compares token representations at equal total size on WikiText-2's 33,278
  // words; each config's one free width (table 144, adaptive 474) was chosen to match the DeFINE
  // model's total within 0.3%.
  constexpr std::int64_t kVocab = 33278;
  const auto define = parts_of("wt2-lstm-define.json", kVocab);
  REQUIRE(define.size() == 3);
  CHECK(define[0].name == kPartDefine);
  CHECK(define[0].count == 337280);  // the main job's unit: the map width does not depend on V
  CHECK(define[1].count == 1905664);
  CHECK(define[2].count == kVocab * 128 + kVocab);  // tied 128-d table and the softmax bias
  CHECK(total(define) == 6535806);

  const auto standard = parts_of("wt2-lstm-standard.json", kVocab);
  REQUIRE(standard.size() == 2);
  CHECK(standard[1].count == kVocab * 144 + kVocab);
  CHECK(total(standard) == 6551902);

  // Adaptive input bands 2,000 / 8,000 / 23,278 at 474 / 118 / 29 wide (factor 4), tied to the
  // adaptive softmax, in front of LSTM 512 / 474.
  const auto adaptive = parts_of("wt2-lstm-adaptive.json", kVocab);
  REQUIRE(adaptive.size() == 2);
  CHECK(total(adaptive) == 6534360);
  for (const auto* parts : {&standard, &adaptive})
    CHECK(std::abs(static_cast<double>(total(*parts)) / static_cast<double>(total(define)) - 1.0) < 0.003);
}

TEST_CASE("configs: DeLighT WMT'14 En-De d_m = 128 and 256 (spec 5.1)", "[models][configs]") {
  const auto d128 = parts_of("delight-wmt14-ende-d128.json");
  CHECK(total(d128) == 2496224 + 43734 * 128);
  const auto d256 = parts_of("delight-wmt14-ende-d256.json");
  CHECK(total(d256) == 8190376 + 43734 * 128);
  // The shared 43,734 x 128 table counts once, as input-output, with the d_m -> 128 projection.
  CHECK(d256[2].name == kPartInputOutput);
  CHECK(d256[2].count == 43734 * 128 + 256 * 128);
}

TEST_CASE("configs: DeFINE Table 2 Transformer-XL rows (context, DeFINE and input-output columns)",
          "[models][configs][transformer_xl]") {
  // The files as shipped but with a 1,000-word vocabulary (cutoffs scaled down with it), so the
  // test does not allocate WT-103's 100 M-parameter tables: the context and DeFINE columns do not
  // depend on V, and the input-output column follows spec 5.3's formula (at V = 267,735 it gives
  // the paper's 103.08 / 69.20 / 34.73 / 17.50 M and 110.04 M for n = 410, asserted in
  // tests/nn/adaptive_test.cpp).
  auto parts = [](const std::string& name) {
    Config cfg = Config::from_file(std::string(DEFINE_SOURCE_DIR) + "/configs/" + name);
    cfg.set("model.vocab_size=1000");
    cfg.set("model.input.cutoffs=[200, 400, 600]");
    const nn::init::ShapesOnlyGuard shapes_only;
    Generator gen(0);
    const BuiltModel m = build_model(cfg.section("model"), 0, gen);
    cfg.section("model").require_all_used();
    return count_parameter_parts(*m.module, m.parts);
  };
  auto column = [](const std::vector<ParameterPart>& p, const char* name) {
    for (const auto& x : p)
      if (x.name == name) return x.count;
    return std::int64_t{0};
  };
  // Table V x n, softmax bias V, cluster weights and biases 3 (n + 1), and, when n != 384, the
  // input projection (= the head's) plus one per tail.
  auto io = [](std::int64_t n, std::int64_t d) { return 1000 * n + 1000 + 3 * (n + 1) + (n != d ? 4 * n * d : 0); };

  const auto base = parts("transformer-xl-wt103-standard.json");
  CHECK(column(base, kPartContext) == 41067220);
  CHECK(column(base, kPartInputOutput) == io(410, 410));
  const auto standard = parts("transformer-xl-wt103-standard-384.json");
  CHECK(column(standard, kPartContext) == 36250420);
  CHECK(column(standard, kPartInputOutput) == io(384, 384));
  for (std::int64_t n : {256, 128, 64}) {
    INFO("n = " << n);
    const auto projective = parts("transformer-xl-wt103-projective-" + std::to_string(n) + ".json");
    CHECK(column(projective, kPartContext) == 36250420);
    CHECK(column(projective, kPartInputOutput) == io(n, 384));
    CHECK(column(projective, kPartDefine) == 0);
  }
  for (std::int64_t n : {384, 256, 128, 64}) {
    INFO("n = " << n);
    const auto define = parts("transformer-xl-wt103-define-" + std::to_string(n) + ".json");
    CHECK(column(define, kPartContext) == 36250420);
    CHECK(column(define, kPartInputOutput) == io(n, 384));
    // The unit reads the 384-d projected vector for every n (N = 3, k = 4096, m = 384, g_max = 128):
    // 2.10 M where the paper prints 1.92 M (spec 5.4: no reading of the paper gives 1.92 M).
    CHECK(column(define, kPartDefine) == 2097204);
  }
}

TEST_CASE("configs: the Multi30k translation models at a joint vocabulary of 8,000", "[models][configs]") {
  // Transformer: 3 encoder layers of 789,760 and 3 decoder layers of 1,053,440 (E 256, F 1024,
  // tests/models/translation_model_test.cpp's formula) plus two final LayerNorms (pre-norm); one
  // 8,000 x 256 table shared by both sides and the output.
  const auto standard = parts_of("multi30k-transformer.json", 8000);
  CHECK(standard[0].name == kPartContext);
  CHECK(standard[0].count == 3 * 789760 + 3 * 1053440 + 2 * 512);
  CHECK(standard[1].count == 8000 * 256);
  // DeFINE: the same context model, an 8,000 x 128 table, the 256 -> 128 output projection and the
  // unit: fewer parameters than the standard model, as the paper's Table 3 claims for its setting.
  const auto define = parts_of("multi30k-define.json", 8000);
  CHECK(define[0].name == kPartDefine);
  CHECK(define[1].count == standard[0].count);
  CHECK(define[2].count == 8000 * 128 + 256 * 128);
  CHECK(total(define) < total(standard));
  CHECK(total(define) == 7159044);
  CHECK(total(parts_of("multi30k-delight.json", 8000)) == 6741712);
}

TEST_CASE("configs: the WMT'14 base Transformer and its DeFINE form at a joint vocabulary of 32,000", "[models][configs]") {
  // The base Transformer's 6 + 6 layers of 512 (inner 2048): 44,138,496, as fairseq's
  // transformer_wmt_en_de counts them; a shared 32,000 x 512 table on top.
  const auto base = parts_of("transformer-wmt14-ende-base.json", 32000);
  CHECK(total(base) == 44138496 + 32000 * 512);
  // DeFINE Table 3's unit (n = 128, k = 1,024, N = 3, m = 512) cuts the table to 128 wide.
  const auto define = parts_of("transformer-wmt14-ende-define.json", 32000);
  CHECK(define[0].name == kPartDefine);
  CHECK(define[1].count == 44138496);
  CHECK(define[2].count == 32000 * 128 + 512 * 128);
  CHECK(total(define) == 49166852);
}

// The released DeLighT recipes' dropouts (spec 4.5): WMT'14 En-De residual and light FFN
// round(0.3 d_m / 1024, 2), attention round(0.1 d_m / 1024, 2), embedding and positions 0.1, DExTra
// and activation 0; WT-103 0.1 everywhere but activation. The light FFN's dropout is tied to the
// residual one when a config does not name it (the released code's default), as the built model
// shows.
TEST_CASE("configs: the DeLighT configs carry the released recipes' dropouts", "[models][configs]") {
  const auto dropout_of = [](const std::string& name) {
    return Config::from_file(std::string(DEFINE_SOURCE_DIR) + "/configs/" + name).section("model").section("dropout");
  };
  for (const int d : {128, 256, 384, 512, 640}) {
    CAPTURE(d);
    const Config c = dropout_of("delight-wmt14-ende-d" + std::to_string(d) + ".json");
    const double residual = std::round(0.3 * d / 1024 * 100) / 100, attention = std::round(0.1 * d / 1024 * 100) / 100;
    CHECK(c.get_double("residual") == Approx(d == 256 ? 0.07 : residual));  // Python rounds 0.075 down (binary)
    CHECK(c.get_double("ffn") == c.get_double("residual"));
    CHECK(c.get_double("attention") == Approx(attention));
    CHECK(c.get_double("embedding") == 0.1);
    CHECK(c.get_double("positions") == 0.1);
    CHECK(c.get_double("dextra") == 0.0);
    CHECK(c.get_double("activation") == 0.0);
  }
  const Config lm = dropout_of("delight-wt103.json");
  for (const char* key : {"residual", "ffn", "attention", "dextra", "embedding", "positions", "adaptive_softmax"}) {
    CAPTURE(key);
    CHECK(lm.get_double(key) == 0.1);
  }
  CHECK(lm.get_double("activation") == 0.0);

  // multi30k-delight.json names no ffn dropout: the built blocks take its residual 0.2.
  const Config cfg = Config::from_file(std::string(DEFINE_SOURCE_DIR) + "/configs/multi30k-delight.json");
  REQUIRE_FALSE(cfg.section("model").section("dropout").has("ffn"));
  Generator gen(0);
  const BuiltModel m = build_model(cfg.section("model"), 8000, gen);
  const auto& nmt = dynamic_cast<const DelightNmt&>(*m.module);
  CHECK(nmt.config().dropout == 0.2);
  CHECK(nmt.config().ffn_dropout == 0.2);
  CHECK(delight_nmt_block_config(nmt.config(), true, 0).ffn_dropout == 0.2);
}
