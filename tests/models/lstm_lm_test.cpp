// The LSTM language model (models/lstm_lm.h) and its token representations
// (models/token_representation.h), built from configs as `define params` / `define train` build
// them: the papers' parameter counts split by part, float64 gradient checks of the whole model for
// every input type, the tied classifier's loss against its own log-probabilities, and config
// errors that name the key.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "core/config.h"
#include "models/lstm_lm.h"
#include "support/models.h"
#include "models/registry.h"
#include "support/gradients.h"

using namespace define;
using namespace define::models;
using Catch::Contains;
using define::test::build_from_json;
using define::test::part;

namespace {

// PyTorch LSTM layer count: 4H(in + H) + 8H.
std::int64_t lstm_layer(std::int64_t in, std::int64_t h) { return 4 * h * (in + h) + 8 * h; }

}  // namespace

TEST_CASE("lstm_lm: AWD-LSTM on PTB has 24,221,600 parameters", "[models][lstm_lm]") {
  const BuiltModel m = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10000,
      "input": {"type": "embedding", "dim": 400}, "hidden": 1150, "layers": 3,
      "dropout": {"weight": 0.5}}})");
  const auto parts = count_parameter_parts(*m.module, m.parts);
  // The AWD-LSTM paper's 24 M; the context part is three PyTorch nn.LSTM layers, whose tensors
  // (weight_ih [4H, in], weight_hh [4H, H], bias_ih and bias_hh [4H]) are checked by name and shape.
  CHECK(part(parts, kPartContext) == 20'211'600);
  const std::int64_t sizes[][2] = {{400, 1150}, {1150, 1150}, {1150, 400}};
  for (int l = 0; l < 3; ++l) {
    const std::int64_t in = sizes[l][0], h = sizes[l][1];
    const std::string s = std::to_string(l);
    CHECK(m.module->parameter("rnn.module.weight_ih_l" + s).shape() == Shape{4 * h, in});
    CHECK(m.module->parameter("rnn.module.weight_hh_l" + s).shape() == Shape{4 * h, h});
    CHECK(m.module->parameter("rnn.module.bias_ih_l" + s).shape() == Shape{4 * h});
    CHECK(m.module->parameter("rnn.module.bias_hh_l" + s).shape() == Shape{4 * h});
  }
  CHECK(part(parts, kPartInputOutput) == 10000 * 400 + 10000);  // tied table + softmax bias
  CHECK(m.module->num_parameters() == 24221600);
  CHECK(part(parts, kPartDefine) == -1);  // no unit, no row
  // Weight drop wraps the LSTM without renaming the raw weights' owner.
  CHECK(m.module->has_parameter("rnn.module.weight_hh_l2"));
  CHECK_THAT(format_parameter_table(parts), Contains("total                 24,221,600       24.22"));
}

TEST_CASE("lstm_lm: DeFINE AWD-LSTM narrows the last layer to the 128-d table (spec 5.3)", "[models][lstm_lm]") {
  // Paper form, n=128, k=1024, N=7, m=400, g_max=64: the unit is spec 11's last row.
  const BuiltModel paper = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10000,
      "input": {"type": "define", "dim": 128, "out_dim": 400, "k": 1024, "depth": 7, "g_max": 64},
      "hidden": 1150, "layers": 3}})");
  const auto parts = count_parameter_parts(*paper.module, paper.parts);
  CHECK(part(parts, kPartDefine) == 2088208);
  CHECK(part(parts, kPartContext) == lstm_layer(400, 1150) + lstm_layer(1150, 1150) + lstm_layer(1150, 128));
  CHECK(part(parts, kPartInputOutput) == 10000 * 128 + 10000);
  CHECK(paper.module->num_parameters() - part(parts, kPartDefine) == 19'673'760);  // spec 5.3, before the unit

  // Released form (define-iclr, G=8): spec 2.3's worked example, 2,177,588.
  const BuiltModel released = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10000,
      "input": {"type": "define-iclr", "dim": 128, "out_dim": 400, "k": 1024, "depth": 7, "max_groups": 8},
      "hidden": 1150, "layers": 3}})");
  CHECK(part(count_parameter_parts(*released.module, released.parts), kPartDefine) == 2177588);
  CHECK(released.module->num_parameters() == 19673760 + 2177588);
}

TEST_CASE("lstm_lm: projective and adaptive inputs count as input-output", "[models][lstm_lm]") {
  const BuiltModel proj = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 1000,
      "input": {"type": "projective", "dim": 64, "out_dim": 200}, "hidden": 300, "layers": 2}})");
  const auto pp = count_parameter_parts(*proj.module, proj.parts);
  CHECK(part(pp, kPartInputOutput) == 1000 * 64 + 64 * 200 + 1000);
  CHECK(part(pp, kPartContext) == lstm_layer(200, 300) + lstm_layer(300, 64));

  // Adaptive input + tied adaptive softmax (DeFINE's LSTM form: no band-0 projection).
  const BuiltModel ad = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 1000,
      "input": {"type": "adaptive", "dim": 64, "cutoffs": [200, 500], "factor": 4}, "hidden": 100, "layers": 1}})");
  const auto ap = count_parameter_parts(*ad.module, ad.parts);
  // Bands 200x64, 300x16 (+16->64 projection), 500x4 (+4->64); head cluster logits 2x64.
  CHECK(part(ap, kPartInputOutput) == 200 * 64 + 300 * 16 + 16 * 64 + 500 * 4 + 4 * 64 + 2 * 64);
  CHECK(part(ap, kPartContext) == lstm_layer(64, 64));
}

TEST_CASE("lstm_lm: DeFINE over adaptive input (paper's LSTM form) ties the adaptive softmax", "[models][lstm_lm]") {
  // The adaptive input is the map layer, the paper-form unit reads its n-wide output, and the
  // classifier is the adaptive softmax tied to the bands; the unit is counted alone.
  const std::string define_unit = R"("k": 96, "depth": 2, "g_max": 2)";
  const BuiltModel m = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 1000, "input": {"type": "define",
      "map": "adaptive", "cutoffs": [200, 500], "factor": 4, "dim": 64, "out_dim": 80, )" + define_unit +
                             R"(}, "hidden": 100, "layers": 1}})");
  const BuiltModel unit_alone = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 1000, "input": {"type": "define",
      "dim": 64, "out_dim": 80, )" + define_unit + R"(}, "hidden": 100, "layers": 1}})");
  const auto parts = count_parameter_parts(*m.module, m.parts);
  // The same bands and tied head as the plain adaptive input above.
  CHECK(part(parts, kPartInputOutput) == 200 * 64 + 300 * 16 + 16 * 64 + 500 * 4 + 4 * 64 + 2 * 64);
  CHECK(part(parts, kPartDefine) == part(count_parameter_parts(*unit_alone.module, unit_alone.parts), kPartDefine));
  CHECK(part(parts, kPartContext) == lstm_layer(80, 64));
  CHECK(m.module->has_parameter("input.adaptive.bands.0.weight"));
  CHECK_FALSE(m.module->has_parameter("input.map.weight"));
  CHECK(m.module->has_parameter("output.softmax.head.cluster_weight"));

  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"type": "define", "map": "bands",
      "dim": 4, "out_dim": 4, "k": 8, "depth": 2, "g_max": 2}}})"),
                    Contains("model.input.map must be 'table', 'adaptive' or 'projected', got 'bands'"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"type": "define",
      "map": "adaptive", "dim": 4, "out_dim": 4, "k": 8, "depth": 2, "g_max": 2}}})"),
                    Contains("model.input.cutoffs"));
}

TEST_CASE("lstm_lm: config errors name the key", "[models][lstm_lm]") {
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"dim": 8}, "hiden": 3}})"),
                    Contains("unknown config key 'model.hiden'"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"type": "glove", "dim": 8}}})"),
                    Contains("unknown input type 'glove'"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "rnn", "vocab_size": 10}})"), Contains("unknown model type 'rnn'"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"dim": 8}}})", 12),
                    Contains("model.vocab_size = 10 but the data's vocabulary has 12 words"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "input": {"dim": 8}}})"),
                    Contains("missing required key 'model.vocab_size'"));
  CHECK_THROWS_WITH(build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 10, "input": {"dim": 8},
                              "dropout": {"output": 1.5}}})"),
                    Contains("dropout.output must be in [0, 1), got 1.5"));
}

TEST_CASE("lstm_lm: float64 gradients of the whole model for every input type", "[models][lstm_lm]") {
  const char* inputs[] = {
      R"({"type": "embedding", "dim": 6})",
      R"({"type": "projective", "dim": 4, "out_dim": 6})",
      R"({"type": "define", "dim": 4, "out_dim": 6, "k": 8, "depth": 2, "g_max": 2})",
      R"({"type": "define-iclr", "dim": 4, "out_dim": 8, "k": 8, "depth": 2, "max_groups": 2})",
      R"({"type": "dextra", "dim": 4, "out_dim": 8, "width_mult": 2, "depth": 2, "max_groups": 2})",
      R"({"type": "adaptive", "dim": 8, "cutoffs": [4, 8], "factor": 2})",
      R"({"type": "define", "map": "adaptive", "cutoffs": [4, 8], "factor": 2, "dim": 8, "out_dim": 6, "k": 8,
          "depth": 2, "g_max": 2, "reduce_skip": true})",
  };
  for (const char* input : inputs) {
    INFO(input);
    const BuiltModel built = build_from_json(std::string(R"({"model": {"type": "lstm_lm", "vocab_size": 12, "input": )") + input +
                                   R"(, "hidden": 5, "layers": 2}})");
    auto& lm = dynamic_cast<LstmLm&>(*built.module);
    lm.to(DType::Float64);
    Generator g(5);
    const Tensor tokens = rand_int({3, 2}, 12, {.dtype = DType::Int64}, g);
    const Tensor targets = rand_int({3, 2}, 12, {.dtype = DType::Int64}, g);
    test::check_gradients([&] { return lm.forward(tokens, targets).loss; }, test::with_parameters(lm));

    // The loss is the mean of -log p(target) from the model's own log-probabilities.
    const Tensor lp = lm.log_prob(tokens).first;
    REQUIRE(lp.shape() == Shape{3, 2, 12});
    const auto lpv = test::values(lp);
    const auto tv = targets.to_vector<std::int64_t>();
    double nll = 0;
    for (std::size_t i = 0; i < tv.size(); ++i) nll -= lpv[i * 12 + static_cast<std::size_t>(tv[i])];
    CHECK(test::values(lm.forward(tokens, targets).loss)[0] == Approx(nll / 6).epsilon(1e-12));
  }
}

TEST_CASE("lstm_lm: carried state equals one pass over the concatenation", "[models][lstm_lm]") {
  const BuiltModel built = build_from_json(R"({"model": {"type": "lstm_lm", "vocab_size": 9,
      "input": {"type": "embedding", "dim": 4}, "hidden": 5, "layers": 2}})");
  auto& lm = dynamic_cast<LstmLm&>(*built.module);
  lm.to(DType::Float64);
  Generator g(2);
  const Tensor tokens = rand_int({6, 2}, 9, {.dtype = DType::Int64}, g);
  const Tensor whole = lm.log_prob(tokens).first;
  auto [first, state] = lm.log_prob(narrow(tokens, 0, 0, 4));
  const Tensor second = lm.log_prob(narrow(tokens, 0, 4, 2), define::models::detach(state)).first;
  const auto w = test::values(whole), a = test::values(first), b = test::values(second);
  std::vector<double> ab = a;  // the two chunks end to end
  ab.insert(ab.end(), b.begin(), b.end());
  test::check_close(ab, w, 0, 1e-13);
}
