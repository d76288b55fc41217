// DeLighT models: the NMT encoder-decoder of spec §5.1 and the WT-103 LM of §5.2, with the
// parameter counts typed in from the spec (never computed by the code under test), the shared /
// tied tables, fairseq's sinusoidal positions, causality, source padding, the loss, float64
// gradient checks and the emulated device.
//
// The counts build each full-size model once (the largest, the 99 M LM, in about a second in
// release); no shortcut is needed because every block of a scaled stack has its own
// (depth, width) anyway.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "models/delight_lm.h"
#include "models/delight_nmt.h"
#include "models/registry.h"
#include "nn/nn.h"
#include "support/gradients.h"
#include "train/lm_trainer.h"

using namespace define;
using namespace define::models;
using Catch::Contains;
using define::test::check_gradients;
using define::test::randomise;
using define::test::tokens;
using define::test::values;

namespace {

// A DeLighT LM small enough to check by hand: V 12, n 4, d_m 8, two blocks, no dropout.
DelightLmConfig tiny_lm(bool adaptive) {
  return {.vocab = 12,
          .map_dim = 4,
          .d_m = 8,
          .max_groups = 2,
          .emb_depth = 2,
          .min_depth = 2,
          .max_depth = 3,
          .layers = 2,
          .width_mult = 1.0,
          .adaptive = adaptive,
          .cutoffs = {4, 8},
          .adaptive_factor = 2.0};
}

}  // namespace

namespace {

// A tiny model: V = 11, n = 4, d_m = 8, G = 2, embedding DExTra depth 2, 2 + 2 blocks of depth
// 2..3, every dropout on (gradient checks reset the generator so masks repeat).
DelightNmtConfig tiny_nmt(bool pre_norm = false) {
  return {.vocab = 11, .padding_idx = 1, .map_dim = 4, .d_m = 8, .max_groups = 2, .emb_depth = 2,
          .emb_width_mult = 2.0, .enc_min_depth = 2, .enc_max_depth = 3, .enc_layers = 2, .enc_width_mult = 1.0,
          .dec_min_depth = 2, .dec_max_depth = 3, .dec_layers = 2, .dec_width_mult = 1.0, .pre_norm = pre_norm,
          .dropout = 0.1, .attention_dropout = 0.1, .activation_dropout = 0.1, .ffn_dropout = 0.1,
          .dextra_dropout = 0.1, .emb_dropout = 0.1, .pe_dropout = 0.1};
}

}  // namespace

// One test case per README row (each builds its full model once, 0.3 - 0.8 s in release).
static void check_nmt_count(std::int64_t d_m, std::int64_t non_lut, std::int64_t readme_centi_m) {
  const std::int64_t V = 43'734, lut = V * 128;  // the joined dictionary that fits all five rows
  const DelightNmt model(DelightNmtConfig{.vocab = V, .d_m = d_m});
  CHECK(model.num_parameters() == non_lut + lut);
  CHECK(model.num_parameters() - model.embed_tokens().num_parameters() == non_lut);
  CHECK(std::llround(double(non_lut + lut) / 1e4) == readme_centi_m);  // the README figure, 0.01 M
  // Project-out only where d_m != 128; post-norm: no final LayerNorms.
  CHECK(model.has_parameter("decoder.project_out.weight") == (d_m != 128));
  CHECK_FALSE(model.has_parameter("encoder.layer_norm.weight"));
  CHECK_FALSE(model.has_parameter("decoder.layer_norm.weight"));
}

TEST_CASE("delight models: §5.1 NMT d_m = 128: 2,496,224 + V*128 = 8,094,176 (README 8.09 M)", "[models][delight]") {
  check_nmt_count(128, 2'496'224, 809);
}
TEST_CASE("delight models: §5.1 NMT d_m = 256: 8,190,376 + V*128 = 13,788,328 (README 13.79 M)", "[models][delight]") {
  check_nmt_count(256, 8'190'376, 1379);
}
TEST_CASE("delight models: §5.1 NMT d_m = 384: 17,647,864 + V*128 = 23,245,816 (README 23.25 M)", "[models][delight]") {
  check_nmt_count(384, 17'647'864, 2325);
}
TEST_CASE("delight models: §5.1 NMT d_m = 512: 31,165,580 + V*128 = 36,763,532 (README 36.76 M)", "[models][delight]") {
  check_nmt_count(512, 31'165'580, 3676);
}
TEST_CASE("delight models: §5.1 NMT d_m = 640: 48,438,028 + V*128 = 54,035,980 (README 54.04 M)", "[models][delight]") {
  check_nmt_count(640, 48'438'028, 5404);
}

TEST_CASE("delight models: shared table, names, tied output", "[models][delight]") {
  DelightNmtConfig c{.vocab = 40, .d_m = 256, .enc_layers = 8, .dec_layers = 8};
  DelightNmt model(c);
  const std::vector<std::string> keys = model.named_parameters().keys();
  CHECK(keys.front() == "embed_tokens.weight");
  for (const char* name : {"encoder.embed.dextra.glts.2.weight", "encoder.layers.3.dextra.glts.2.weight",
                           "encoder.layers.7.self_attn.qkv_proj.weight", "decoder.layers.0.encoder_attn.kv_proj.weight",
                           "decoder.layers.5.fc2.bias", "decoder.project_out.weight"}) {
    INFO(name);
    CHECK(std::find(keys.begin(), keys.end(), name) != keys.end());
  }
  // The encoder's and decoder's map layers are the shared table, listed (and counted) once.
  CHECK(std::find(keys.begin(), keys.end(), "encoder.embed.map.weight") == keys.end());
  CHECK(model.parameter("encoder.embed.map.weight").shares_storage_with(model.embed_tokens().weight()));
  CHECK(model.parameter("decoder.embed.map.weight").shares_storage_with(model.embed_tokens().weight()));
  CHECK(model.parameter("decoder.project_out.weight").shape() == Shape{128, 256});
  // Block-wise scaling and G = 8 reach the blocks: block 7 has depth 8, block 0 depth 4.
  CHECK(model.submodule_as<nn::DelightEncoderBlock>("encoder.layers.7").dextra().groups().size() == 8);
  CHECK(model.submodule_as<nn::DelightDecoderBlock>("decoder.layers.0").dextra().config().depth == 4);
  CHECK(model.submodule_as<nn::DelightDecoderBlock>("decoder.layers.6").dextra().config().width_mult == 2.857);
  CHECK(model.submodule_as<nn::DelightEncoderBlock>("encoder.layers.0").dextra().config().max_groups == 8);
  // Pre-norm adds a final LayerNorm to encoder and decoder.
  c.pre_norm = true;
  CHECK(DelightNmt(c).num_parameters() == model.num_parameters() + 4 * 256);
}

TEST_CASE("delight models: fairseq sinusoidal positions, padding-aware", "[models][delight]") {
  // dim 6: half 3, w_i = exp(-i ln(1e4) / 2) = 1, 1e-2, 1e-4. padding_idx 1: first real token is 2.
  const Tensor pad = from_vector(std::vector<std::int64_t>{0, 1, 0, 0, 1, 0}, Shape{3, 2});
  const std::vector<double> got = values(delight_positions(pad, 6, 1, DType::Float64, Device::cpu()));
  const auto row = [](double p) {
    return std::vector<double>{std::sin(p), std::sin(p * 1e-2), std::sin(p * 1e-4),
                               std::cos(p), std::cos(p * 1e-2), std::cos(p * 1e-4)};
  };
  // [t][b]: b = 0 is right-padded (2, 3, pad), b = 1 left-padded (pad, 2, 3).
  const std::vector<std::vector<double>> want{row(2), std::vector<double>(6, 0.0), row(3), row(2),
                                              std::vector<double>(6, 0.0), row(3)};
  for (std::size_t i = 0; i < want.size(); ++i)
    for (std::size_t j = 0; j < 6; ++j) CHECK(got[i * 6 + j] == Approx(want[i][j]).margin(1e-12));
}

TEST_CASE("delight models: NMT forward, loss, causality and source padding", "[models][delight]") {
  Generator gen(3);
  DelightNmt model(tiny_nmt(), gen);
  randomise(model, gen);
  model.eval();
  const Tensor src = tokens({4, 5, 6, 7, 8, 1}, {3, 2});  // sequence 1 ends in padding
  const Tensor src_pad = tokens({0, 0, 0, 0, 0, 1}, {3, 2});
  Tensor tgt = tokens({2, 2, 9, 3, 10, 4, 5, 6}, {4, 2});
  const Tensor logits = model.forward(src, src_pad, tgt);
  REQUIRE(logits.shape() == Shape{4, 2, 11});
  // Without a mask, padding is src == padding_idx: the same here.
  CHECK(values(model.forward(src, Tensor(), tgt)) == values(logits));

  // Causal: changing target tokens t >= 2 leaves logits at t < 2 unchanged.
  const Tensor tgt2 = tokens({2, 2, 9, 3, 7, 7, 7, 7}, {4, 2});
  const std::vector<double> a = values(logits), b = values(model.forward(src, src_pad, tgt2));
  const std::size_t cut = 2 * 2 * 11;
  CHECK(std::vector<double>(a.begin(), a.begin() + cut) == std::vector<double>(b.begin(), b.begin() + cut));
  CHECK(std::vector<double>(a.begin() + cut, a.end()) != std::vector<double>(b.begin() + cut, b.end()));
  // A padded source position does not reach the output; a real one does.
  CHECK(values(model.forward(tokens({4, 5, 6, 7, 8, 9}, {3, 2}), src_pad, tgt)) == values(logits));
  CHECK(values(model.forward(tokens({4, 5, 6, 7, 9, 1}, {3, 2}), src_pad, tgt)) != values(logits));

  // Loss: label-smoothed cross entropy over the non-padding targets, by hand from log_softmax.
  const Tensor target = tokens({3, 9, 1, 4, 5, 6, 7, 1}, {4, 2});  // two padding targets
  const double eps = 0.1;
  const std::vector<double> lp = values(log_softmax(logits, -1)), t = values(target);
  double total = 0;
  int counted = 0;
  for (std::size_t r = 0; r < t.size(); ++r) {
    if (t[r] == 1) continue;
    double smooth = 0;
    for (int c = 0; c < 11; ++c) smooth -= lp[r * 11 + c] / 11.0;
    total += (1 - eps) * -lp[r * 11 + std::size_t(t[r])] + eps * smooth;
    ++counted;
  }
  CHECK(model.loss(logits, target, eps).item_double() == Approx(total / counted).epsilon(1e-6));

  // Backward reaches every parameter.
  model.train();
  model.zero_grad();
  backward(model.loss(model.forward(src, src_pad, tgt), target, eps));
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  REQUIRE_THROWS_WITH(model.forward(src, src_pad, tokens({2, 3, 4}, {3, 1})), Contains("DelightNmt: source [3,2] and target [3,1] batch sizes differ"));
  REQUIRE_THROWS_WITH(model.loss(logits, tokens({1, 2}, {1, 2})), Contains("DelightNmt: loss expects logits [T, B, V] and target [T, B]"));
}

TEST_CASE("delight models: float64 gradient check of a tiny NMT model's loss", "[models][delight]") {
  // The units and blocks are checked element by element in their own tests; here the model-level
  // wiring is: the shared table (input of both embedding units and the tied output), both
  // embedding units' ends, the first encoder block (source padding mask), the last decoder
  // block's cross-attention, project-out, and with pre-norm the final LayerNorms. A few hundred
  // elements, each costing two forwards of the whole model.
  for (bool pre : {false, true}) {
    DYNAMIC_SECTION("pre_norm " << pre) {
      Generator gen(7);
      DelightNmt model(tiny_nmt(pre), gen);
      model.to(DType::Float64);
      randomise(model, gen);
      Generator dg(9);
      model.set_generator(dg);
      const Tensor src = tokens({4, 5, 6, 7, 8, 1}, {3, 2}), tgt = tokens({2, 2, 9, 3, 10, 4}, {3, 2});
      const Tensor target = tokens({9, 3, 10, 4, 1, 5}, {3, 2});
      // The table's padding row gets its gradient from the tied output layer only; numerically
      // nothing else reads it either (the padded source position is masked out of every attention).
      std::vector<std::string> names{"embed_tokens.weight", "encoder.embed.dextra.input_layer.weight",
                                     "decoder.embed.dextra.output_layer.norm.bias", "encoder.layers.0.self_attn.qkv_proj.weight",
                                     "encoder.layers.0.dextra.glts.1.weight", "decoder.layers.1.encoder_attn.q_proj.weight",
                                     "decoder.layers.1.encoder_attn.kv_proj.weight", "decoder.layers.1.encoder_attn.kv_proj.bias",
                                     "decoder.layers.1.encoder_attn_layer_norm.weight", "decoder.project_out.weight"};
      if (pre) names.insert(names.end(), {"encoder.layer_norm.weight", "decoder.layer_norm.bias"});
      std::vector<std::pair<std::string, Tensor>> wrt;
      for (const std::string& n : names) wrt.emplace_back(n, model.parameter(n));
      // 16 elements of each (the blocks have exhaustive checks in tests/nn/delight_block_test.cpp).
      check_gradients([&] {
        dg.set_state({9, 0});
        return model.loss(model.forward(src, Tensor(), tgt), target, 0.1);
      }, wrt, 1e-6, 1e-7, 1e-5, /*sample=*/16);
    }
  }
}

TEST_CASE("delight models: an NMT model on the emulated device matches the CPU", "[models][delight]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(12);
  DelightNmtConfig c = tiny_nmt();
  c.d_m = 32, c.map_dim = 16, c.max_groups = 4;
  DelightNmt model(c, gen);
  randomise(model, gen);
  Generator dg(3);
  model.set_generator(dg);
  const Tensor src = tokens({4, 5, 6, 7, 8, 1}, {3, 2}), tgt = tokens({2, 2, 9, 3, 10, 4, 5, 6}, {4, 2});
  dg.set_state({3, 0});
  const std::vector<double> cpu = values(model.forward(src, Tensor(), tgt));
  model.to(Device::emu());
  dg.set_state({3, 0});
  const Tensor y = model.forward(copy_to_device(src, Device::emu()), Tensor(), copy_to_device(tgt, Device::emu()));
  CHECK(y.device() == Device::emu());
  CHECK(define::test::compare(values(y), cpu, 1e-5, 1e-5).max_share <= 1.0);
}

TEST_CASE("delight models: §5.2 WT-103 LM parameter count (99,247,668)", "[models][delight]") {
  const DelightLmConfig c{.vocab = 267'744, .d_m = 1024};  // 4/12, w 2, B 12, G 32, cutoffs 20000, 60000, factor 2
  DelightLm lm(c);
  // Adaptive input: 20000*128 + 40000*64 + 207744*32 + (128 + 64 + 32)*128.
  CHECK(lm.embed().adaptive_map()->num_parameters() == 11'796'480);
  CHECK(lm.embed().unit().num_parameters() == 2'285'824);
  CHECK(lm.submodule("layers").num_parameters() == 85'034'036);
  CHECK(lm.submodule("project_out").num_parameters() == 131'072);
  // Tied word tables and tail projections: the softmax adds only its 2 x 128 cluster logits.
  CHECK(lm.num_parameters() == 99'247'668);
  CHECK(lm.num_parameters() - 11'796'480 - 2'285'824 - 85'034'036 - 131'072 == 256);
  CHECK_FALSE(lm.has_parameter("layer_norm.weight"));  // no_decoder_final_norm
  CHECK(lm.submodule_as<nn::DelightDecoderBlock>("layers.11").config().pre_norm);
  CHECK(lm.submodule_as<nn::DelightDecoderBlock>("layers.11").dextra().config().depth == 12);
  CHECK_FALSE(lm.submodule_as<nn::DelightDecoderBlock>("layers.0").has_cross_attention());
}

TEST_CASE("delight models: tiny LM, causal, loss, float64 gradient check", "[models][delight]") {
  for (bool adaptive : {false, true}) {
    DYNAMIC_SECTION("adaptive " << adaptive) {
      Generator gen(5);
      const DelightLmConfig c{.vocab = 12, .map_dim = 4, .d_m = 8, .max_groups = 2, .emb_depth = 2,
                              .min_depth = 2, .max_depth = 3, .layers = 2, .width_mult = 1.0,
                              .adaptive = adaptive, .cutoffs = {4, 8}, .adaptive_factor = 2.0,
                              .dropout = 0.1, .attention_dropout = 0.1, .dextra_dropout = 0.1, .emb_dropout = 0.1,
                              .pe_dropout = 0.1};
      DelightLm lm(c, gen);
      lm.to(DType::Float64);
      randomise(lm, gen);
      const Tensor in = tokens({2, 3, 4, 5, 6, 7, 8, 9}, {4, 2}), target = tokens({3, 4, 5, 6, 7, 8, 9, 10}, {4, 2});
      lm.eval();
      const std::vector<double> a = values(lm.log_probs(in));
      REQUIRE(a.size() == 4 * 2 * 12);
      const std::vector<double> b = values(lm.log_probs(tokens({2, 3, 4, 5, 11, 11, 11, 11}, {4, 2})));
      CHECK(std::vector<double>(a.begin(), a.begin() + 2 * 2 * 12) == std::vector<double>(b.begin(), b.begin() + 2 * 2 * 12));
      // The loss is the mean of -log p(target) read off log_probs.
      double nll = 0;
      const std::vector<double> t = values(target);
      for (std::size_t r = 0; r < t.size(); ++r) nll -= a[r * 12 + std::size_t(t[r])];
      CHECK(lm.loss(in, target).item_double() == Approx(nll / 8).epsilon(1e-9));
      lm.train();
      Generator dg(4);
      lm.set_generator(dg);
      // Model-level wiring (the blocks and units have their own full checks): the map layer (and
      // through tying the output), the embedding unit's ends, the first and last blocks' inputs,
      // project-out and the adaptive softmax's own cluster logits.
      std::vector<std::pair<std::string, Tensor>> wrt;
      for (const auto& [name, p] : lm.named_parameters())
        if (name.starts_with("embed.map.") || name.starts_with("adaptive_softmax.") || name == "project_out.weight" ||
            name == "embed.dextra.input_layer.weight" || name == "embed.dextra.output_layer.bias" ||
            name == "layers.0.self_attn_layer_norm.weight" || name == "layers.1.dextra.input_layer.weight" ||
            name == "layers.1.fc2.weight")
          wrt.emplace_back(name, p);
      REQUIRE(wrt.size() == (adaptive ? 13u : 7u));  // adaptive: 3 bands x (table, projection)
      check_gradients([&] { dg.set_state({4, 0}); return lm.loss(in, target); }, wrt);
    }
  }
}

// Word corpora reserve no padding id, so the DeLighT LM has none unless the config names one: with
// fairseq's <pad> = 1 as the default, word 1 (a real, frequent word in define's vocabularies) had
// its input row zeroed and never trained, and its targets were dropped from the loss and the
// perplexity. One step on a batch full of word 1: its row of the input table gets a gradient and
// the step changes it, and every target, word 1's included, counts in the loss.
TEST_CASE("delight models: the LM has no padding id by default, so word 1 trains and counts", "[models][delight]") {
  CHECK(DelightLmConfig{}.padding_idx == -1);
  for (const bool adaptive : {false, true}) {
    CAPTURE(adaptive);
    Generator gen(7);
    DelightLm lm(tiny_lm(adaptive), gen);
    lm.to(DType::Float64);
    const Tensor in = tokens({1, 3, 1, 5, 1, 1, 8, 1}, {4, 2}), target = tokens({3, 1, 5, 1, 1, 8, 1, 1}, {4, 2});
    const std::string table = adaptive ? "embed.map.bands.0.weight" : "embed.map.weight";
    REQUIRE(lm.has_parameter(table));
    const Tensor weight = lm.parameter(table);
    const std::vector<double> w = values(weight);
    const std::size_t dim = static_cast<std::size_t>(weight.size(1));
    CHECK(std::any_of(w.begin() + dim, w.begin() + 2 * dim, [](double v) { return v != 0.0; }));  // not zeroed
    // The loss is the mean over all 8 targets of -log p(target), word 1's five included.
    lm.eval();
    const std::vector<double> lp = values(lm.log_probs(in));
    const std::vector<double> t = values(target);
    double nll = 0;
    for (std::size_t r = 0; r < t.size(); ++r) nll -= lp[r * 12 + static_cast<std::size_t>(t[r])];
    CHECK(lm.loss(in, target).item_double() == Approx(nll / 8).epsilon(1e-12));
    lm.train();
    backward(lm.loss(in, target));
    const std::vector<double> g = values(weight.grad());
    CHECK(std::any_of(g.begin() + dim, g.begin() + 2 * dim, [](double v) { return v != 0.0; }));
  }
}

// DeLighT's positional dropout as released: one mask per (sequence, channel) shared by every time
// step (the reference's RecurrentDropout), with positions_mask = element the per-element form; the
// model draws B x d_m mask values a forward instead of T x B x d_m.
TEST_CASE("delight models: position dropout keeps one mask per sequence and channel, as released",
          "[models][delight]") {
  Generator g(3);
  const Tensor y = nn::locked_dropout(ones({5, 3, 8}, {.dtype = DType::Float64}), 0.5, true, g);
  const std::vector<double> v = values(y);
  int dropped = 0;
  for (std::size_t bc = 0; bc < 24; ++bc) {
    for (std::size_t t = 1; t < 5; ++t) CHECK(v[t * 24 + bc] == v[bc]);  // the same at every step
    CHECK((v[bc] == 0.0 || v[bc] == 2.0));
    dropped += v[bc] == 0.0;
  }
  CHECK(dropped > 0);
  CHECK(dropped < 24);

  const auto draws = [](const std::string& mask) {
    const std::string json =
        R"({"model": {"type": "delight_lm", "vocab_size": 12, "map_dim": 4, "d_m": 8, "max_groups": 2,
        "emb_depth": 2, "min_depth": 2, "max_depth": 3, "layers": 2, "width_mult": 1.0, "adaptive": false,
        "dropout": {"positions": 0.5)" +
        mask + "}}}";
    Generator gen(1);
    const BuiltModel m = build_model(Config::from_text(json, "<test>").section("model"), 12, gen);
    auto& lm = dynamic_cast<DelightLm&>(*m.module);
    lm.train();
    Generator dg(9);
    lm.set_generator(dg);
    (void)lm.features(tokens({2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9}, {8, 2}));  // T 8, B 2
    return dg.state().offset;
  };
  CHECK(draws("") == 2 * 8);                                      // B x d_m, the released form by default
  CHECK(draws(R"(, "positions_mask": "element")") == 8 * 2 * 8);  // T x B x d_m
  CHECK_THROWS_WITH(draws(R"(, "positions_mask": "time")"),
                    Contains("model.dropout.positions_mask must be 'sequence'") && Contains("got 'time'"));
}

// fairseq's context-window evaluation (train::evaluate_lm with context C): the first window scores
// its W tokens, each later one scores W - C tokens after C of context, no state carried. Checked
// against a closed form, token by token: the token at input position p is scored in the window
// starting at 0 when p < W, else at W + k (W - C) - C with k = (p - W) / (W - C), and its NLL is
// read off log_probs of that window alone.
TEST_CASE("delight models: context-window evaluation scores every token once, with its window's context",
          "[models][delight][eval]") {
  Generator gen(5);
  DelightLm lm(tiny_lm(false), gen);
  lm.to(DType::Float64);
  randomise(lm, gen);
  const std::int64_t T = 23, B = 2;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(T * B));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7 + i / 3) % 12);
  const Tensor batches = from_vector(ids, {T, B});
  lm.eval();
  for (const auto& [W, C] : {std::pair{8, 5}, std::pair{8, 1}, std::pair{5, 4}, std::pair{30, 10}}) {
    CAPTURE(W, C);
    double want = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t p = 0; p + 1 < T; ++p) {
        const std::int64_t begin = p < W ? 0 : W + (p - W) / (W - C) * (W - C) - C;
        const std::int64_t end = std::min<std::int64_t>(begin + W, T - 1);
        REQUIRE(p >= begin);
        REQUIRE(p < end);
        std::vector<std::int64_t> window;
        for (std::int64_t t = begin; t < end; ++t) window.push_back(ids[static_cast<std::size_t>(t * B + b)]);
        const std::vector<double> lp =
            values(lm.log_probs(from_vector(window, {static_cast<std::int64_t>(window.size()), 1})));
        want -= lp[static_cast<std::size_t>((p - begin) * 12 + ids[static_cast<std::size_t>((p + 1) * B + b)])];
      }
    want /= static_cast<double>((T - 1) * B);
    CHECK(train::evaluate_lm(lm, batches, W, C) == Approx(want).epsilon(1e-10));
  }
  // Without context the windows follow one another (nothing carried for this model).
  CHECK(train::evaluate_lm(lm, batches, 8, 0) != Approx(train::evaluate_lm(lm, batches, 8, 5)).epsilon(1e-6));
  CHECK_THROWS_WITH(train::evaluate_lm(lm, batches, 8, 8),
                    Contains("context window (8) must be 0") && Contains("less than the window (8)"));
}
