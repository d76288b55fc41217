// The Transformer-XL language model (models/transformer_xl.h): the DeFINE paper's Table 2 context
// column counted from a formula written here, float64 gradient checks of the whole model (with a
// non-empty memory) for every token representation, the memory's defining property (a window
// processed after its predecessor, with the predecessor as memory, gives the log-probabilities
// of one pass over both), clamp_len / same_length changing only what they should, and config
// errors naming the key.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "support/models.h"
#include "models/registry.h"
#include "models/transformer_xl.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "support/gradients.h"

using namespace define;
using namespace define::models;
using Catch::Contains;
using define::test::build_from_json;
using define::test::part;

namespace {

// One relative-attention layer of the reference code, counted by hand: bias-free q/k/v, r and
// output projections, two LayerNorms, the feed-forward net with biases.
std::int64_t layer_count(std::int64_t d, std::int64_t heads, std::int64_t d_head, std::int64_t inner) {
  const std::int64_t hd = heads * d_head;
  return 3 * d * hd + d * hd + hd * d + 2 * d + (d * inner + inner) + (inner * d + d) + 2 * d;
}

std::string tiny(const std::string& input, const std::string& extra = "") {
  return R"({"model": {"type": "transformer_xl", "vocab_size": 11, "input": )" + input +
         R"(, "d_model": 8, "n_head": 2, "d_head": 3, "d_inner": 10, "n_layer": 2, "dropout": 0, "mem_len": 3)" +
         extra + "}}";
}

const char* kInputs[] = {
    R"({"type": "projected", "dim": 8})",
    R"({"type": "projected", "dim": 4, "out_dim": 8, "cutoffs": [4, 7]})",
    R"({"type": "adaptive", "dim": 8, "cutoffs": [4, 7], "factor": 2})",
    R"({"type": "embedding", "dim": 8})",
    R"({"type": "define", "map": "projected", "dim": 4, "proj_dim": 8, "out_dim": 8, "cutoffs": [5],
        "k": 16, "depth": 2, "g_max": 2})",
};

}  // namespace

TEST_CASE("transformer_xl: DeFINE Table 2 context column and the baseline's 151.11 M", "[models][transformer_xl]") {
  // Table 2's rows: d_model 384, 10 heads of 41, inner 1920, 16 layers, and two global biases.
  const BuiltModel m = build_from_json(R"({"model": {"type": "transformer_xl", "vocab_size": 1000,
      "input": {"type": "projected", "dim": 128, "out_dim": 384, "cutoffs": [200, 400]},
      "d_model": 384, "n_head": 10, "d_head": 41, "d_inner": 1920, "n_layer": 16}})");
  const auto parts = count_parameter_parts(*m.module, m.parts);
  CHECK(part(parts, kPartContext) == 16 * layer_count(384, 10, 41, 1920) + 2 * 410);
  CHECK(part(parts, kPartContext) == 36250420);  // the paper's 141.25 M - 103.08 M - 1.92 M = 36.25 M
  // Input-output: table V n, softmax bias V, cluster weights and biases 2 (n + 1), and four
  // n -> 384 projections (input = head, three tails' own): spec 5.3's formula at V = 1000.
  CHECK(part(parts, kPartInputOutput) == 1000 * 128 + 1000 + 2 * 129 + 3 * 128 * 384);
  CHECK(part(parts, kPartDefine) == -1);  // no unit, no row

  // The original Transformer-XL (410 wide, inner 2100): context 41,067,220, so with the I/O of
  // V = 267,735 at n = 410 (110,040,318, asserted in tests/nn/adaptive_test.cpp) 151.11 M.
  const BuiltModel base = build_from_json(R"({"model": {"type": "transformer_xl", "vocab_size": 50,
      "input": {"type": "projected", "dim": 410}, "d_model": 410, "n_head": 10, "d_head": 41, "d_inner": 2100,
      "n_layer": 16}})");
  CHECK(part(count_parameter_parts(*base.module, base.parts), kPartContext) == 41067220);
  CHECK(41067220 + 110040318 == 151107538);

  // untie_r: one pair of biases per layer instead of one global pair.
  const BuiltModel untied = build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "untie_r": true)"));
  const BuiltModel tied = build_from_json(tiny(R"({"type": "projected", "dim": 8})"));
  CHECK(untied.module->num_parameters() == tied.module->num_parameters() + 2 * 6);
}

TEST_CASE("transformer_xl: float64 gradients of the whole model with a memory, every input type",
          "[models][transformer_xl]") {
  for (const char* input : kInputs) {
    INFO(input);
    const BuiltModel built = build_from_json(tiny(input));
    auto& lm = dynamic_cast<TransformerXL&>(*built.module);
    lm.to(DType::Float64);
    Generator g(5);
    const Tensor first = rand_int({3, 2}, 11, {.dtype = DType::Int64}, g);
    const Tensor tokens = rand_int({2, 2}, 11, {.dtype = DType::Int64}, g);
    const Tensor targets = rand_int({2, 2}, 11, {.dtype = DType::Int64}, g);
    const LmState memory = detach(lm.forward(first, first).state);
    REQUIRE(memory.size() == 2);
    CHECK(memory.at("mem0").shape() == Shape{3, 2, 8});
    // 16 elements of every parameter: the layers have exhaustive checks of their own; this checks
    // the model around them (memory, relative positions, biases, input and tied output).
    test::check_gradients([&] { return lm.forward(tokens, targets, memory).loss; }, test::with_parameters(lm), 1e-6,
                          1e-7, 1e-5, /*sample=*/16);

    // The loss is the mean of -log p(target) from the model's own log-probabilities.
    const Tensor lp = lm.log_prob(tokens, memory).first;
    REQUIRE(lp.shape() == Shape{2, 2, 11});
    const auto lpv = test::values(lp);
    const auto tv = targets.to_vector<std::int64_t>();
    double nll = 0;
    for (std::size_t i = 0; i < tv.size(); ++i) nll -= lpv[i * 11 + static_cast<std::size_t>(tv[i])];
    CHECK(test::values(lm.forward(tokens, targets, memory).loss)[0] == Approx(nll / 4).epsilon(1e-12));
  }
}

TEST_CASE("transformer_xl: a window after its memory equals one pass over both", "[models][transformer_xl]") {
  // With mem_len >= the first window, layer l's memory is exactly its input at the earlier
  // positions, so the relative attention of the second window sees what one long window sees.
  for (const char* input : kInputs) {
    INFO(input);
    const BuiltModel built = build_from_json(tiny(input, R"(, "mem_len": 4)"));
    auto& lm = dynamic_cast<TransformerXL&>(*built.module);
    lm.to(DType::Float64);
    Generator g(3);
    const Tensor tokens = rand_int({7, 2}, 11, {.dtype = DType::Int64}, g);
    const Tensor whole = lm.log_prob(tokens).first;
    auto [a, memory] = lm.log_prob(narrow(tokens, 0, 0, 4));
    CHECK(memory.at("mem1").shape() == Shape{4, 2, 8});
    const Tensor b = lm.log_prob(narrow(tokens, 0, 4, 3), memory).first;
    const auto w = test::values(whole), av = test::values(a), bv = test::values(b);
    std::vector<double> ab = av;  // the two windows end to end
    ab.insert(ab.end(), bv.begin(), bv.end());
    test::check_close(ab, w, 0, 1e-12);
  }
  // mem_len 2 < 4: the carried memory is the last 2 positions, and the result differs.
  const BuiltModel built = build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "mem_len": 2)"));
  auto& lm = dynamic_cast<TransformerXL&>(*built.module);
  lm.to(DType::Float64);
  Generator g(3);
  const Tensor tokens = rand_int({7, 2}, 11, {.dtype = DType::Int64}, g);
  const auto w = test::values(lm.log_prob(tokens).first);
  auto [a, memory] = lm.log_prob(narrow(tokens, 0, 0, 4));
  CHECK(memory.at("mem0").shape() == Shape{2, 2, 8});
  const auto bv = test::values(lm.log_prob(narrow(tokens, 0, 4, 3), memory).first);
  double diff = 0;
  for (std::size_t i = 0; i < bv.size(); ++i) diff = std::max(diff, std::abs(bv[i] - w[8 * 11 + i]));
  CHECK(diff > 1e-6);
}

TEST_CASE("transformer_xl: clamp_len and same_length change only the far past", "[models][transformer_xl]") {
  Generator g(4);
  const Tensor tokens = rand_int({6, 2}, 11, {.dtype = DType::Int64}, g);
  auto log_probs = [&](const std::string& extra) {
    const BuiltModel built = build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "mem_len": 3)" + extra));
    auto& lm = dynamic_cast<TransformerXL&>(*built.module);
    lm.to(DType::Float64);
    return test::values(lm.log_prob(tokens).first);
  };
  const auto plain = log_probs(""), clamped = log_probs(R"(, "clamp_len": 2)"), same = log_probs(R"(, "same_length": true)");
  // Positions 0..2 see distances <= 2 only: clamping at 2 changes nothing there, and later
  // positions (distances up to 5) change. same_length (windows of 3 keys) likewise.
  auto max_diff = [&](const std::vector<double>& x, std::size_t from, std::size_t to) {
    double d = 0;
    for (std::size_t i = from; i < to; ++i) d = std::max(d, std::abs(x[i] - plain[i]));
    return d;
  };
  const std::size_t row = 2 * 11;  // one time step of [T, B, V]
  CHECK(max_diff(clamped, 0, 3 * row) < 1e-12);
  CHECK(max_diff(clamped, 3 * row, 6 * row) > 1e-6);
  CHECK(max_diff(same, 0, 3 * row) < 1e-12);
  CHECK(max_diff(same, 3 * row, 6 * row) > 1e-6);
}

TEST_CASE("transformer_xl: config errors name the key", "[models][transformer_xl]") {
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 4})")),
                    Contains("the token representation outputs 4 features but d_model = 8"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "d_model": 7)")),
                    Contains("d_model must be even"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "mem_len": 0, "same_length": true)")),
                    Contains("same_length needs mem_len > 0"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "dropatt": 1.0)")),
                    Contains("dropatt must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 8})", R"(, "n_heads": 2)")),
                    Contains("n_heads"));
  CHECK_THROWS_WITH(build_from_json(tiny(R"({"type": "projected", "dim": 8, "cutoffs": [4, 20]})")), Contains("cutoff"));
}

namespace {

// One training step's loss and gradients (by parameter name) of `json`'s model, dropout drawn
// from a generator seeded 17.
std::pair<double, std::map<std::string, std::vector<double>>> one_step(const std::string& json, Device device,
                                                                        DType dtype) {
  const BuiltModel built = build_from_json(json);
  auto& lm = dynamic_cast<TransformerXL&>(*built.module);
  lm.to(dtype);
  lm.to(device);
  Generator dropout_gen(17);
  lm.set_generator(dropout_gen);
  lm.train();
  Generator g(5);
  const Tensor first = to_device(rand_int({3, 2}, 11, {.dtype = DType::Int64}, g), device);
  const Tensor tokens = to_device(rand_int({4, 2}, 11, {.dtype = DType::Int64}, g), device);
  const Tensor targets = to_device(rand_int({4, 2}, 11, {.dtype = DType::Int64}, g), device);
  const LmState memory = detach(lm.forward(first, first).state);
  auto out = lm.forward(tokens, targets, memory);
  backward(out.objective);
  std::map<std::string, std::vector<double>> grads;
  for (const auto& [name, p] : lm.named_parameters()) grads[name] = test::values(p.grad());
  return {test::values(out.loss)[0], grads};
}

}  // namespace

TEST_CASE("transformer_xl: recompute gives the stored path's loss and gradients, dropout included",
          "[models][transformer_xl][recompute]") {
  for (const char* input : {kInputs[0], kInputs[4]}) {
    INFO(input);
    const std::string dropout = R"(, "dropout": 0.2, "dropatt": 0.1)";
    const auto [loss, grads] = one_step(tiny(input, dropout), Device::cpu(), DType::Float64);
    const auto [loss_re, grads_re] = one_step(tiny(input, dropout + R"(, "recompute": true)"), Device::cpu(),
                                              DType::Float64);
    CHECK(loss_re == Approx(loss).epsilon(1e-14));
    REQUIRE(grads_re.size() == grads.size());
    for (const auto& [name, g] : grads) {
      INFO(name);
      test::check_close(grads_re.at(name), g, 1e-13, 1e-12);
    }
  }
}

TEST_CASE("transformer_xl: recompute keeps one layer's activations, measured on the emulated device",
          "[models][transformer_xl][recompute]") {
  REQUIRE(kernels::register_devices().emu_devices >= 1);
  if (!define::cuda_emu::caching_allocator_enabled())
    DEFINE_SKIP_TEST("reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off (ctest runs it "
                     "again with the cache on)");
  // Activations dominate: 6 layers of d 32 over 48 x 8 tokens and a memory of 16, a tiny vocabulary.
  auto peak = [](bool recompute) {
    const BuiltModel built = build_from_json(
        std::string(R"({"model": {"type": "transformer_xl", "vocab_size": 11, "input": {"type": "projected", "dim": 32},
          "d_model": 32, "n_head": 4, "d_head": 8, "d_inner": 64, "n_layer": 6, "dropout": 0.1, "mem_len": 16,
          "recompute": )") + (recompute ? "true" : "false") + "}}");
    auto& lm = dynamic_cast<TransformerXL&>(*built.module);
    const Device emu = Device::emu(0);
    lm.to(emu);
    lm.train();
    Generator g(5);
    const Tensor tokens = to_device(rand_int({48, 8}, 11, {.dtype = DType::Int64}, g), emu);
    const LmState memory = detach(lm.forward(tokens, tokens).state);
    auto& alloc = define::cuda_emu::allocator(0);
    alloc.reset_peak();
    const std::size_t before = alloc.stats().active_bytes;
    {
      auto out = lm.forward(tokens, tokens, memory);
      backward(out.objective);
    }
    return alloc.stats().peak_active_bytes - before;
  };
  const std::size_t stored = peak(false), recomputed = peak(true);
  INFO("peak bytes of one step: stored " << stored << ", recomputed " << recomputed);
  CHECK(recomputed < stored / 2);  // 6 layers' activations against 6 inputs and one layer's
}

// model.init = reference draws the layers as the reference code's weights_init does: Linear weights
// N(0, 0.02) with zero biases, LayerNorm gains N(1, 0.02) with zero shifts; the default keeps
// define's (Xavier-uniform weights, unit gains). Moments over the 2 x (1,600 + ... ) elements of a
// d_model 40 model, to a few standard errors.
TEST_CASE("transformer_xl: model.init = reference draws the reference code's layer init", "[models][transformer_xl]") {
  const auto build = [](const std::string& init) {
    return build_from_json(R"({"model": {"type": "transformer_xl", "vocab_size": 50, "input": {"type": "projected",
        "dim": 40}, "d_model": 40, "n_head": 4, "d_head": 10, "d_inner": 160, "n_layer": 2)" +
                           init + "}}");
  };
  const BuiltModel ref = build(R"(, "init": "reference")"), xavier = build("");
  std::vector<double> weights, gains, zeros;
  for (const auto& [name, p] : ref.module->named_parameters()) {
    if (!name.starts_with("layers.")) continue;
    const std::vector<double> v = test::values(p);
    if (name.ends_with("norm.weight"))
      gains.insert(gains.end(), v.begin(), v.end());
    else if (name.ends_with(".bias") && !name.ends_with("r_w_bias") && !name.ends_with("r_r_bias"))
      zeros.insert(zeros.end(), v.begin(), v.end());
    else if (name.ends_with(".weight"))
      weights.insert(weights.end(), v.begin(), v.end());
  }
  const auto moments = [](const std::vector<double>& v) {
    double mean = 0, sq = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (double x : v) sq += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(sq / static_cast<double>(v.size()))};
  };
  REQUIRE(weights.size() == 2 * (3 * 40 * 40 + 40 * 40 + 40 * 40 + 40 * 160 + 160 * 40));
  REQUIRE(gains.size() == 2 * 2 * 40);
  const auto [w_mean, w_std] = moments(weights);
  CHECK(std::abs(w_mean) < 0.001);
  CHECK(w_std == Approx(0.02).epsilon(0.02));
  const auto [g_mean, g_std] = moments(gains);
  CHECK(g_mean == Approx(1.0).margin(0.005));
  CHECK(g_std == Approx(0.02).epsilon(0.25));
  CHECK(std::all_of(zeros.begin(), zeros.end(), [](double x) { return x == 0.0; }));
  // The default: unit gains, Xavier-uniform weights (qkv's bound sqrt(6 / (40 + 120)) = 0.19).
  const std::vector<double> unit = test::values(xavier.module->parameter("layers.0.attn.norm.weight"));
  CHECK(std::all_of(unit.begin(), unit.end(), [](double x) { return x == 1.0; }));
  CHECK(moments(test::values(xavier.module->parameter("layers.0.attn.qkv.weight"))).second > 0.05);
  CHECK_THROWS_WITH(build(R"(, "init": "normal")"),
                    Catch::Contains("model.init must be 'xavier' or 'reference', got 'normal'"));
}

// input.tie_projections: which of the tied projected softmax's cluster projections (d_proj 8 x
// n 4 each, a head and two tails here) are the input's: the head's (DeFINE Table 2's counts, the
// default), every tail's (Transformer-XL's tie_projs = [False, True, True, True]), or none.
TEST_CASE("transformer_xl: tie_projections ties the head's projection, the tails', or none",
          "[models][transformer_xl]") {
  const auto count = [](const std::string& tying) {
    return build_from_json(tiny(R"({"type": "projected", "dim": 4, "out_dim": 8, "cutoffs": [4, 7])" + tying + "}"))
        .module->num_parameters();
  };
  const std::int64_t head = count(""), tails = count(R"(, "tie_projections": "tails")"),
                     none = count(R"(, "tie_projections": "none")");
  CHECK(head == count(R"(, "tie_projections": "head")"));
  CHECK(head - tails == 8 * 4);  // input, tail 1, tail 2 against input (= tails 1, 2) and head
  CHECK(none - tails == 2 * 8 * 4);
  CHECK_THROWS_WITH(count(R"(, "tie_projections": "all")"),
                    Catch::Contains("model.input.tie_projections must be 'head'") && Catch::Contains("got 'all'"));
}
