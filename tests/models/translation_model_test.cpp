// The translation models (models/transformer_nmt.h, models/delight_nmt.h) and beam search
// (models/beam_search.h): parameter counts from a formula written here, float64 gradient checks of
// the whole Transformer with each token representation, incremental decoding equal to the
// teacher-forced pass (after beam search's row reordering too), and beam search against a greedy
// decoder and an exhaustive search written here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/beam_search.h"
#include "models/delight_nmt.h"
#include "models/transformer_nmt.h"
#include "support/gradients.h"
#include "support/models.h"

using namespace define;
using namespace define::models;
using Catch::Contains;
using define::test::build_from_json;
using define::test::part;

namespace {

constexpr std::int64_t kVocab = 13, kPad = 0, kBos = 2, kEos = 3;

std::string tiny(const std::string& input, const std::string& extra = "", int layers = 2) {
  return R"({"model": {"type": "transformer_nmt", "vocab_size": 13, "input": )" + input +
         R"(, "d_model": 8, "heads": 2, "ffn_dim": 12, "encoder_layers": )" + std::to_string(layers) +
         R"(, "decoder_layers": )" + std::to_string(layers) + R"(, "dropout": {"residual": 0})" + extra + "}}";
}

const char* kInputs[] = {
    R"({"type": "embedding", "dim": 8, "scale": true})",
    R"({"type": "define", "dim": 4, "out_dim": 8, "k": 16, "depth": 2, "g_max": 2})",
    R"({"type": "projective", "dim": 4, "out_dim": 8})",
};

// A source batch [S, B] right-padded with kPad: sentences of the given lengths (eos last).
Tensor source_batch(const std::vector<std::int64_t>& lengths, std::int64_t seed) {
  const std::int64_t S = *std::max_element(lengths.begin(), lengths.end()), B = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int64_t> v(static_cast<std::size_t>(S * B), kPad);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < lengths[b]; ++s)
      v[s * B + b] = s + 1 == lengths[b] ? kEos : 4 + (seed + 7 * s + 3 * b + s * b) % (kVocab - 4);
  return from_vector(v, {S, B});
}

std::int64_t encoder_layer(std::int64_t e, std::int64_t f) { return 4 * (e * e + e) + 2 * e + (e * f + f) + (f * e + e) + 2 * e; }
std::int64_t decoder_layer(std::int64_t e, std::int64_t f) { return encoder_layer(e, f) + 4 * (e * e + e) + 2 * e; }

}  // namespace

TEST_CASE("transformer_nmt: parameter counts by part", "[models][nmt]") {
  // Standard: one shared V x E table, tied output without bias, 2 + 2 layers (post-norm: no final norms).
  const BuiltModel std_model = build_from_json(tiny(kInputs[0]));
  auto parts = count_parameter_parts(*std_model.module, std_model.parts);
  CHECK(part(parts, kPartInputOutput) == 13 * 8);
  CHECK(part(parts, kPartContext) == 2 * encoder_layer(8, 12) + 2 * decoder_layer(8, 12));
  CHECK(part(parts, kPartDefine) == -1);
  // The base Transformer (Vaswani et al.: 6 + 6 layers of 512, 2048 inner) with a 37,000-token
  // shared vocabulary: 44.1 M context, 63.1 M in all (fairseq's transformer_wmt_en_de counts).
  const BuiltModel base = build_from_json(R"({"model": {"type": "transformer_nmt", "vocab_size": 37000,
      "input": {"type": "embedding", "dim": 512, "scale": true}}})");
  parts = count_parameter_parts(*base.module, base.parts);
  CHECK(part(parts, kPartContext) == 6 * 3152384 + 6 * 4204032);
  CHECK(base.module->num_parameters() == 37000 * 512 + 44138496);
  // DeFINE: the unit is its own part; the output projects d_model -> n before the n-wide table;
  // pre-norm adds a final LayerNorm to each stack.
  const BuiltModel def = build_from_json(tiny(kInputs[1], R"(, "pre_norm": true)"));
  parts = count_parameter_parts(*def.module, def.parts);
  CHECK(part(parts, kPartContext) == 2 * encoder_layer(8, 12) + 2 * decoder_layer(8, 12) + 2 * 16);
  CHECK(part(parts, kPartInputOutput) == 13 * 4 + 8 * 4);
  CHECK(part(parts, kPartDefine) > 0);
}

TEST_CASE("transformer_nmt: float64 gradients of the whole model, every input type", "[models][nmt]") {
  // One layer a side: what this checks is the model around the layers (shared table, positions,
  // padding masks, final norms, tied output), whose layers have gradient checks of their own
  // (tests/nn/attention_test.cpp); 16 elements of every parameter are perturbed (each costs two
  // passes of the model). Post- and pre-norm with the plain table, pre-norm for the unit (the
  // form the configs use), post-norm for the projection.
  const std::pair<const char*, const char*> cases[] = {
      {kInputs[0], "false"}, {kInputs[0], "true"}, {kInputs[1], "true"}, {kInputs[2], "false"}};
  for (const auto& [input, norm] : cases) {
    INFO(input << " pre_norm " << norm);
    const BuiltModel built = build_from_json(tiny(input, std::string(R"(, "pre_norm": )") + norm, /*layers=*/1));
    auto& m = dynamic_cast<TransformerNmt&>(*built.module);
    m.to(DType::Float64);
    const Tensor src = source_batch({4, 2}, 5);
    const Tensor tgt_in = from_vector(std::vector<std::int64_t>{kBos, kBos, 5, 7, 9, kPad}, {3, 2});
    const Tensor tgt_out = from_vector(std::vector<std::int64_t>{5, 7, 9, kEos, kEos, kPad}, {3, 2});
    test::check_gradients(
        [&] {
          const Tensor logits = m.logits(src, tgt_in);
          return cross_entropy(reshape(logits, {6, kVocab}), reshape(tgt_out, {6}), kPad, 0.1);
        },
        test::with_parameters(m), 1e-6, 1e-7, 1e-5, /*sample=*/16);
  }
}

TEST_CASE("translation models: loss_sum equals the label-smoothed cross entropy over logits(), gradients included",
          "[models][nmt]") {
  // The trainer's objective (TranslationModel::loss_sum, the fused output layer) against the
  // generic ops over the materialised logits, on every output form: the plain tied table, the
  // DeFINE input's projection before its table, the table with a bias, and DeLighT's table. Float64;
  // padding rows in the target; the plain NLL alongside.
  const std::string delight = R"({"model": {"type": "delight_nmt", "vocab_size": 13, "padding_idx": 0,
      "map_dim": 8, "d_m": 16, "emb_depth": 2, "max_groups": 2,
      "encoder": {"min_depth": 2, "max_depth": 3, "layers": 1}, "decoder": {"min_depth": 2, "max_depth": 3, "layers": 1}}})";
  const std::string configs[] = {tiny(kInputs[0], "", 1), tiny(kInputs[1], R"(, "pre_norm": true)", 1),
                                 tiny(kInputs[0], R"(, "output_bias": true)", 1), delight};
  const Tensor src = source_batch({4, 2, 3}, 5);
  const Tensor tgt_in = from_vector(std::vector<std::int64_t>{kBos, kBos, kBos, 5, 7, 9, 6, kPad, 8}, {3, 3});
  const Tensor tgt_out = from_vector(std::vector<std::int64_t>{5, 7, 9, 6, kEos, 8, kEos, kPad, kEos}, {3, 3});
  for (const std::string& config : configs) {
    INFO(config);
    const BuiltModel built = build_from_json(config);
    auto& m = dynamic_cast<TranslationModel&>(*built.module);
    m.to(DType::Float64);
    m.eval();  // the same dropout-free pass both ways
    const auto params = m.parameters();
    for (const double eps : {0.0, 0.1}) {
      INFO("label smoothing " << eps);
      Tensor nll_sum;
      const Tensor fused = m.loss_sum(src, tgt_in, tgt_out, eps, &nll_sum);
      const std::vector<Tensor> fused_grads = grad(fused, params);
      const Tensor flat = reshape(m.logits(src, tgt_in), {9, kVocab}), target = reshape(tgt_out, {9});
      const Tensor want = cross_entropy(flat, target, kPad, eps, Reduction::Sum);
      const std::vector<Tensor> want_grads = grad(want, params);
      CHECK(fused.item_double() == Approx(want.item_double()).epsilon(1e-12));
      CHECK(nll_sum.item_double() ==
            Approx(cross_entropy(detach(flat), target, kPad, 0.0, Reduction::Sum).item_double()).epsilon(1e-12));
      for (std::size_t k = 0; k < params.size(); ++k) test::check_close(fused_grads[k], want_grads[k], 1e-12, 1e-10);
    }
  }
  const BuiltModel built = build_from_json(tiny(kInputs[0]));
  CHECK_THROWS_WITH(dynamic_cast<TranslationModel&>(*built.module).loss_sum(src, tgt_in, reshape(tgt_out, {9, 1}), 0.1),
                    Contains("target output [9,1] does not match target input [3,3]"));
}

namespace {

// Teacher-forced logits [T, B, V] against step-by-step decoding of the same prefixes, with the
// rows reversed after the second step (as beam search reorders them).
void check_incremental(const TranslationModel& m, const Tensor& src, const Tensor& tgt_in) {
  const std::int64_t T = tgt_in.size(0), B = tgt_in.size(1), V = m.vocab();
  const std::vector<double> full = test::values(m.logits(src, tgt_in));
  const std::vector<std::int64_t> tokens = tgt_in.to_vector<std::int64_t>();
  auto state = m.begin_decoding(src);
  std::vector<std::int64_t> order(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) order[b] = b;
  for (std::int64_t t = 0; t < T; ++t) {
    if (t == 2) {
      std::reverse(order.begin(), order.end());
      m.select_rows(*state, from_vector(order, {B}));
    }
    std::vector<std::int64_t> prev(static_cast<std::size_t>(B));
    for (std::int64_t r = 0; r < B; ++r) prev[r] = tokens[t * B + order[r]];
    const std::vector<double> step = test::values(m.decode_step(*state, from_vector(prev, {B})));
    for (std::int64_t r = 0; r < B; ++r)
      for (std::int64_t v = 0; v < V; ++v) {
        INFO("step " << t << " row " << r << " token " << v);
        CHECK(step[r * V + v] == Approx(full[(t * B + order[r]) * V + v]).margin(1e-10));
      }
  }
}

}  // namespace

TEST_CASE("translation models: incremental decoding equals the teacher-forced pass", "[models][nmt]") {
  const Tensor src = source_batch({5, 2, 4}, 7);
  const Tensor tgt_in = from_vector(std::vector<std::int64_t>{kBos, kBos, kBos, 5, 6, 7, 8, 9, 10, 11, 12, 4}, {4, 3});
  for (const char* input : kInputs) {
    for (const char* norm : {"false", "true"}) {
      INFO(input << " pre_norm " << norm);
      const BuiltModel built = build_from_json(tiny(input, std::string(R"(, "pre_norm": )") + norm));
      auto& m = dynamic_cast<TranslationModel&>(*built.module);
      m.to(DType::Float64);
      m.eval();
      check_incremental(m, src, tgt_in);
    }
  }
  SECTION("DeLighT NMT (cached decoder)") {
    const BuiltModel built = build_from_json(R"({"model": {"type": "delight_nmt", "vocab_size": 13, "padding_idx": 0,
        "map_dim": 8, "d_m": 16, "emb_depth": 2, "max_groups": 2,
        "encoder": {"min_depth": 2, "max_depth": 3, "layers": 2}, "decoder": {"min_depth": 2, "max_depth": 3, "layers": 2}}})");
    auto& m = dynamic_cast<TranslationModel&>(*built.module);
    m.to(DType::Float64);
    m.eval();
    check_incremental(m, src, tgt_in);
  }
  SECTION("training mode is refused") {
    const BuiltModel built = build_from_json(tiny(kInputs[0]));
    CHECK_THROWS_WITH(dynamic_cast<TranslationModel&>(*built.module).begin_decoding(src), Contains("eval mode"));
  }
}

namespace {

// -log p of each next token under teacher forcing: the log-probability beam search must report.
double sequence_log_prob(const TranslationModel& m, const Tensor& src_column, const std::vector<std::int32_t>& tokens) {
  std::vector<std::int64_t> in{kBos};
  for (auto t : tokens) in.push_back(t);
  const std::int64_t T = static_cast<std::int64_t>(in.size());
  const std::vector<double> lp = test::values(log_softmax(m.logits(src_column, from_vector(in, {T, 1})), -1));
  double total = 0;
  for (std::int64_t t = 0; t < T; ++t) total += lp[t * m.vocab() + (t + 1 < T ? tokens[t] : kEos)];
  return total;
}

}  // namespace

TEST_CASE("beam_search: greedy, exhaustive and batched agree with direct computations", "[models][nmt][beam]") {
  const BuiltModel built = build_from_json(tiny(kInputs[0]));
  auto& m = dynamic_cast<TranslationModel&>(*built.module);
  m.to(DType::Float64);
  m.eval();
  const Tensor src = source_batch({5, 3, 6, 1}, 11);
  const std::int64_t B = src.size(1);
  auto column = [&](std::int64_t b) {
    std::vector<std::int64_t> v;
    const auto all = src.to_vector<std::int64_t>();
    for (std::int64_t s = 0; s < src.size(0); ++s)
      if (all[s * B + b] != kPad) v.push_back(all[s * B + b]);
    return from_vector(v, {static_cast<std::int64_t>(v.size()), 1});
  };

  SECTION("beam 1 is greedy decoding") {
    // fairseq's lengths: at most 6 tokens before eos (eos forced at step 6), eos not at step 0.
    const auto hyps = beam_search(m, src, {.beam = 1, .max_len_b = 6, .bos = kBos, .eos = kEos});
    for (std::int64_t b = 0; b < B; ++b) {
      std::vector<std::int32_t> greedy;
      for (int t = 0; t <= 6; ++t) {
        std::vector<std::int64_t> in{kBos};
        for (auto x : greedy) in.push_back(x);
        const auto lp = test::values(m.logits(column(b), from_vector(in, {static_cast<std::int64_t>(in.size()), 1})));
        const double* last = lp.data() + (in.size() - 1) * kVocab;
        std::int64_t best = -1;
        for (std::int64_t v = 0; v < kVocab; ++v)
          if (v != kPad && v != kBos && (t < 6 || v == kEos) && (t > 0 || v != kEos) &&
              (best < 0 || last[v] > last[best]))
            best = v;
        if (best == kEos) break;
        greedy.push_back(static_cast<std::int32_t>(best));
      }
      REQUIRE(hyps[b].size() == 1);
      CHECK(hyps[b][0].tokens == greedy);
      CHECK(hyps[b][0].log_prob == Approx(sequence_log_prob(m, column(b), greedy)).margin(1e-9));
    }
  }

  SECTION("a beam wider than the search space finds the exhaustive best, for several length penalties") {
    // Generable tokens: unk (1) and 4..12 -> 10 non-eos choices; at most 2 tokens before eos, and
    // at least min_len: 1 + 10 + 100 = 111 sequences with min_len 0, 110 with 1 (no empty one), all
    // of which a beam of 128 keeps.
    for (const auto& setting : {std::pair{0.0, 1}, std::pair{1.0, 1}, std::pair{2.0, 1}, std::pair{1.0, 0}}) {
      // (Not structured bindings: both are captured below, which clang before 16 cannot do with one.)
      const double lenpen = setting.first;
      const int min_len = setting.second;
      INFO("lenpen " << lenpen << ", min_len " << min_len);
      const auto hyps = beam_search(
          m, src,
          {.beam = 128, .lenpen = lenpen, .max_len_b = 2, .min_len = min_len, .bos = kBos, .eos = kEos, .nbest = 5});
      for (std::int64_t b = 0; b < B; ++b) {
        std::vector<std::pair<double, std::vector<std::int32_t>>> all;
        std::function<void(std::vector<std::int32_t>)> walk = [&](std::vector<std::int32_t> seq) {
          const double lp = sequence_log_prob(m, column(b), seq);
          if (static_cast<int>(seq.size()) >= min_len)
            all.push_back({lp / std::pow(static_cast<double>(seq.size() + 1), lenpen), seq});
          if (seq.size() == 2) return;
          for (std::int32_t v = 1; v < kVocab; ++v) {
            if (v == kBos || v == kEos) continue;
            auto next = seq;
            next.push_back(v);
            walk(next);
          }
        };
        walk({});
        std::stable_sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        REQUIRE(all.size() == (min_len == 0 ? 111u : 110u));
        REQUIRE(hyps[b].size() == 5);
        for (int i = 0; i < 5; ++i) {
          CHECK(hyps[b][i].score == Approx(all[i].first).margin(1e-9));
          CHECK(hyps[b][i].tokens == all[i].second);
        }
      }
    }
  }

  SECTION("a batch decodes as its sentences one at a time") {
    const BeamSearchOptions opt{.beam = 4, .lenpen = 1.0, .max_len_a = 1.0, .max_len_b = 2, .bos = kBos, .eos = kEos};
    const auto batched = beam_search(m, src, opt);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto alone = beam_search(m, column(b), opt);
      CHECK(alone[0][0].tokens == batched[b][0].tokens);
      CHECK(alone[0][0].score == Approx(batched[b][0].score).margin(1e-9));
      // max_len_a x source length + max_len_b bounds the tokens before eos (the source's eos not
      // counted).
      CHECK(static_cast<std::int64_t>(batched[b][0].tokens.size()) <= (column(b).size(0) - 1) + 2);
    }
  }

  SECTION("bad options are named") {
    CHECK_THROWS_WITH(beam_search(m, src, {.beam = 0}), Contains("beam must be >= 1"));
    CHECK_THROWS_WITH(beam_search(m, src, {.beam = 2, .nbest = 3}), Contains("nbest must be in [1, beam = 2]"));
    CHECK_THROWS_WITH(beam_search(m, src, {.eos = 13}), Contains("eos id 13 is outside the vocabulary"));
    CHECK_THROWS_WITH(beam_search(m, src, {.min_len = -1}), Contains("min_len must be >= 0"));
  }
}

namespace {

// A translation model whose next-token distribution is the same at every step, whatever the source
// and the prefix: log-softmax of `logits` (pad 0, unk 1, bos 2, eos 3, words 4 and 5). It lets
// beam search's length rules be checked against a known answer.
class FixedDistributionModel final : public TranslationModel {
 public:
  explicit FixedDistributionModel(std::vector<double> logits)
      : TranslationModel("FixedDistributionModel"), logits_(std::move(logits)) {
    eval();
  }
  std::int64_t vocab() const override { return 6; }
  std::int64_t padding_idx() const override { return 0; }
  Tensor logits(const Tensor&, const Tensor&) const override { fail("test", "not used"); }
  Tensor loss_sum(const Tensor&, const Tensor&, const Tensor&, double, Tensor*) const override {
    fail("test", "not used");
  }
  std::unique_ptr<DecodingState> begin_decoding(const Tensor& src) const override {
    auto s = std::make_unique<DecodingState>();
    s->rows = src.size(1);
    return s;
  }
  Tensor decode_step(DecodingState& s, const Tensor& prev) const override {
    REQUIRE(prev.size(0) == s.rows);
    ++s.steps;
    std::vector<double> all;
    for (std::int64_t r = 0; r < s.rows; ++r) all.insert(all.end(), logits_.begin(), logits_.end());
    return from_vector(all, {s.rows, 6});
  }
  void select_rows(DecodingState& s, const Tensor& rows) const override { s.rows = rows.size(0); }
  PartRules part_rules() const override { return {}; }

 private:
  std::vector<double> logits_;
};

}  // namespace

// fairseq's SequenceGenerator: eos is banned before min_len tokens (1 by default, so a model whose
// best first token is eos still translates into something), and a hypothesis holds up to
// max_len_a x source length + max_len_b tokens before its eos, the source length counting neither
// padding nor eos; only then is eos forced.
TEST_CASE("beam_search: eos never comes first, and lengths are counted as fairseq counts them", "[models][nmt][beam]") {
  // Source: 4 words and eos, and 1 word and eos (padded).
  const Tensor src = from_vector(std::vector<std::int64_t>{4, 4, 5, 3, 5, 0, 4, 0, 3, 0}, {5, 2});
  const std::vector<std::int64_t> src_words = {4, 1};
  for (const std::int64_t beam : {1, 3}) {
    CAPTURE(beam);
    // Eos is the best token at every step; word 5 the best other one.
    const FixedDistributionModel eos_first({-9, -9, -9, 2.0, 0.5, 1.0});
    auto hyps = beam_search(eos_first, src, {.beam = beam, .bos = 2, .eos = 3});
    for (std::size_t b = 0; b < 2; ++b) CHECK(hyps[b][0].tokens == std::vector<std::int32_t>{5});
    hyps = beam_search(eos_first, src, {.beam = beam, .min_len = 0, .bos = 2, .eos = 3});
    for (std::size_t b = 0; b < 2; ++b) CHECK(hyps[b][0].tokens.empty());  // min_len 0: the empty translation
    hyps = beam_search(eos_first, src, {.beam = beam, .min_len = 3, .bos = 2, .eos = 3});
    for (std::size_t b = 0; b < 2; ++b) CHECK(hyps[b][0].tokens == std::vector<std::int32_t>(3, 5));

    // Eos is the worst token: every hypothesis runs to the limit, 2 x words + 3 tokens, then eos.
    const FixedDistributionModel eos_last({-9, -9, -9, -5.0, 0.5, 1.0});
    hyps = beam_search(eos_last, src, {.beam = beam, .max_len_a = 2.0, .max_len_b = 3, .bos = 2, .eos = 3});
    for (std::size_t b = 0; b < 2; ++b) {
      CAPTURE(b);
      CHECK(static_cast<std::int64_t>(hyps[b][0].tokens.size()) == 2 * src_words[b] + 3);
      CHECK(hyps[b][0].tokens == std::vector<std::int32_t>(hyps[b][0].tokens.size(), 5));
    }
  }
}

TEST_CASE("transformer_nmt: config errors name the key", "[models][nmt]") {
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "embedding", "dim": 6})")),
                    Contains("gives the layers 6-wide vectors but model.d_model = 8 (set the input's dim to d_model)"));
  CHECK_THROWS_WITH(build_from_json(tiny(kInputs[0], R"(, "heads": 3)")), Contains("d_model 8 is not divisible by heads 3"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "adaptive", "dim": 8, "cutoffs": [5]})")),
                    Contains("has no single table for the tied classifier"));
  CHECK_THROWS_WITH(build_from_json(tiny(kInputs[0], R"(, "padding_idx": 13)")), Contains("padding_idx = 13 is outside"));
  CHECK_THROWS_WITH(build_from_json(tiny(kInputs[0], R"(, "encoder_layer": 2)")), Contains("encoder_layer"));
}

TEST_CASE("transformer_nmt: recompute gives the stored path's loss and gradients, dropout included",
          "[models][nmt][recompute]") {
  auto step = [](bool recompute) {
    const BuiltModel built = build_from_json(
        std::string(R"({"model": {"type": "transformer_nmt", "vocab_size": 13, "input": )") + kInputs[1] +
        R"(, "d_model": 8, "heads": 2, "ffn_dim": 12, "encoder_layers": 2, "decoder_layers": 2, "pre_norm": true,
            "dropout": {"residual": 0.2, "attention": 0.1, "activation": 0.1}, "recompute": )" +
        (recompute ? "true" : "false") + "}}");
    auto& m = dynamic_cast<TransformerNmt&>(*built.module);
    m.to(DType::Float64);
    Generator dropout_gen(23);
    m.set_generator(dropout_gen);
    m.train();
    const Tensor src = source_batch({4, 2}, 5);
    const Tensor tgt_in = from_vector(std::vector<std::int64_t>{kBos, kBos, 5, 7, 9, kPad}, {3, 2});
    const Tensor tgt_out = from_vector(std::vector<std::int64_t>{5, 7, 9, kEos, kEos, kPad}, {3, 2});
    const Tensor loss = m.loss_sum(src, tgt_in, tgt_out, 0.1);
    backward(loss);
    std::map<std::string, std::vector<double>> grads;
    for (const auto& [name, p] : m.named_parameters()) grads[name] = test::values(p.grad());
    return std::make_pair(test::values(loss)[0], grads);
  };
  const auto [loss, grads] = step(false);
  const auto [loss_re, grads_re] = step(true);
  CHECK(loss_re == Approx(loss).epsilon(1e-14));
  REQUIRE(grads_re.size() == grads.size());
  for (const auto& [name, g] : grads) {
    INFO(name);
    test::check_close(grads_re.at(name), g, 1e-13, 1e-12);
  }
}
