// Adaptive input and adaptive softmax (nn/adaptive.h), behaviour: band layout and forward
// semantics by hand; the fused loss against -log_prob[target]; log-prob rows summing to 1; tying;
// dropout; float64 gradient checks of every layer and option; the emulated device against the CPU;
// errors. The parameter counts of the paper configurations are in adaptive_count_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/adaptive.h"
#include "support/adaptive.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::make_io;
using Ints = std::vector<std::int64_t>;
using define::test::check_close;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::random_leaf;
using define::test::randomise;
using define::test::tokens;
using define::test::values;
using define::test::with_parameters;

namespace {

// -log_prob[r, t_r] per row (0 for ignored rows), from log_prob() alone.
std::vector<double> nll_from_log_prob(const Tensor& lp, const Ints& target, std::int64_t ignore = -100) {
  const std::vector<double> v = values(lp);
  const std::int64_t vocab = lp.size(-1);
  std::vector<double> out;
  for (std::size_t r = 0; r < target.size(); ++r)
    out.push_back(target[r] == ignore ? 0.0 : -v[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(target[r])]);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Semantics

TEST_CASE("adaptive: AdaptiveInput forward by hand, padding row", "[nn][adaptive]") {
  Generator gen(3);
  AdaptiveInput layer({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .padding_idx = 1}, gen);
  layer.to(DType::Float64);
  const Tensor tok = tokens({5, 1, 17, 29, 8, 0}, {2, 3});
  const Tensor out = layer.forward(tok);
  CHECK(out.shape() == Shape{2, 3, 8});
  const std::vector<double> got = values(out);
  // Token w of band i: P_i (sqrt(dim_i) E_i[w - c]).
  const Ints first{0, 8, 18};
  const Ints tv{5, 1, 17, 29, 8, 0};
  for (std::size_t k = 0; k < tv.size(); ++k) {
    const std::size_t band = tv[k] < 8 ? 0 : (tv[k] < 18 ? 1 : 2);
    const Tensor row = select(layer.embedding(band), 0, tv[k] - first[band]);
    const std::int64_t dim = layer.bands().dims[band];
    const Tensor want = linear(reshape(mul(row, std::sqrt(double(dim))), {1, dim}), layer.projection(band));
    const std::vector<double> w = values(want);
    for (std::size_t j = 0; j < 8; ++j) CHECK(got[k * 8 + j] == Approx(w[j]).margin(1e-12));
  }
  // Padding (token 1) reads as zeros.
  for (std::size_t j = 0; j < 8; ++j) CHECK(got[8 + j] == 0.0);
  // Without scaling and band 0 unprojected: band-0 rows come out unchanged.
  AdaptiveInput plain({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .project_band0 = false, .scale = false},
                      gen);
  CHECK(values(plain.forward(tokens({3}, {1}))) == values(select(plain.embedding(0), 0, 3)));
  CHECK_FALSE(plain.projection(0).defined());
}

TEST_CASE("adaptive: loss equals -log_prob[target], log_prob rows sum to 1, log_prob by hand", "[nn][adaptive]") {
  Generator gen(4);
  const Ints target{0, 9, 29, -100, 17, 7, 18, 3, 25, 12, 11};
  const std::int64_t n_rows = static_cast<std::int64_t>(target.size());
  const Tensor tgt = tokens(target, {n_rows});
  const Tensor hidden = rand_uniform({n_rows, 8}, -1, 1, {DType::Float64}, gen);
  AdaptiveSoftmax untied({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .dropout = 0.3, .head_bias = true,
                          .tail_bias = true},
                         nullptr, gen);
  untied.to(DType::Float64);
  randomise(untied, gen);
  untied.eval();
  auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(
      AdaptiveInputConfig{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2},
      AdaptiveSoftmaxConfig{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .tie_weights = true,
                            .tie_projections = true},
      true, gen);
  io->to(DType::Float64);
  auto io_txl = make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(
      ProjectedAdaptiveConfig{.vocab = 30, .dim = 6, .proj_dim = 8, .cutoffs = {8, 18}},
      ProjectedAdaptiveConfig{.vocab = 30, .dim = 6, .proj_dim = 8, .cutoffs = {8, 18}}, true, gen);
  io_txl->to(DType::Float64);
  randomise(*io_txl, gen);
  const std::vector<std::pair<std::string, std::function<Tensor(Reduction)>>> losses = {
      {"untied", [&](Reduction r) { return untied.loss(hidden, tgt, r); }},
      {"tied", [&](Reduction r) { return io->output->loss(hidden, tgt, r); }},
      {"projected", [&](Reduction r) { return io_txl->output->loss(hidden, tgt, r); }}};
  const std::vector<std::function<Tensor()>> log_probs = {[&] { return untied.log_prob(hidden); },
                                                          [&] { return io->output->log_prob(hidden); },
                                                          [&] { return io_txl->output->log_prob(hidden); }};
  for (std::size_t k = 0; k < losses.size(); ++k) {
    INFO(losses[k].first);
    const Tensor lp = log_probs[k]();
    CHECK(lp.shape() == Shape{n_rows, 30});
    const std::vector<double> want = nll_from_log_prob(lp, target);
    check_close(values(losses[k].second(Reduction::None)), want, 1e-12, 1e-12);
    double total = 0;
    for (double w : want) total += w;
    check_close(values(losses[k].second(Reduction::Sum)), {total}, 1e-12, 1e-12);
    check_close(values(losses[k].second(Reduction::Mean)), {total / double(n_rows - 1)}, 1e-12, 1e-12);
    for (double s : values(sum(exp(lp), {1}))) CHECK(std::abs(s - 1.0) < 1e-12);
  }
  // Untied log_prob from its definition with generic ops: head = h W^T + b over [words; clusters],
  // tail i = (h P_i^T) W_i^T + b_i.
  const Tensor head_w = concat({untied.parameter("head.word_weight"), untied.parameter("head.cluster_weight")}, 0);
  const Tensor head_lp = log_softmax(linear(hidden, head_w, untied.parameter("head.bias")), 1);
  std::vector<Tensor> pieces{narrow(head_lp, 1, 0, 8)};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "tails." + std::to_string(i) + ".";
    const Tensor logits = linear(linear(hidden, untied.parameter(p + "projection")), untied.parameter(p + "weight"),
                                 untied.parameter(p + "bias"));
    pieces.push_back(add(log_softmax(logits, 1), narrow(head_lp, 1, 8 + i, 1)));
  }
  check_close(values(untied.log_prob(hidden)), values(concat(pieces, 1)), 1e-12, 1e-12);
  // An empty batch: loss 0 (mean over no rows), log-probs [0, V].
  CHECK(untied.loss(zeros({0, 8}, {.dtype = DType::Float64}), tokens({}, {0})).item_double() == 0.0);
  CHECK(untied.log_prob(zeros({0, 8}, {.dtype = DType::Float64})).shape() == Shape{0, 30});
  CHECK(io->input->forward(tokens({}, {0, 3})).shape() == Shape{0, 3, 8});
  // 3-d hidden: [2, 5, n] -> [2, 5, V], loss with [2, 5] targets.
  const Tensor h3 = rand_uniform({2, 5, 8}, -1, 1, {DType::Float64}, gen);
  const Ints t3{1, 2, 3, 9, 20, 29, 0, 8, 18, 17};
  CHECK(untied.log_prob(h3).shape() == Shape{2, 5, 30});
  check_close(values(untied.loss(h3, tokens(t3, {2, 5}), Reduction::None)),
              nll_from_log_prob(reshape(untied.log_prob(h3), {10, 30}), t3), 1e-12, 1e-12);
}

TEST_CASE("adaptive: dropout only in training, reproducible from the generator", "[nn][adaptive]") {
  Generator gen(5);
  AdaptiveSoftmax layer({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .dropout = 0.5}, nullptr, gen);
  const Tensor hidden = rand_uniform({6, 8}, -1, 1, {}, gen);
  const Tensor tgt = tokens({0, 9, 29, 17, 7, 18}, {6});
  layer.eval();
  const double eval_loss = layer.loss(hidden, tgt).item_double();
  CHECK(layer.loss(hidden, tgt).item_double() == eval_loss);
  layer.train();
  Generator drop(77);
  layer.set_generator(drop);
  const double a = layer.loss(hidden, tgt).item_double();
  drop.manual_seed(77);
  CHECK(layer.loss(hidden, tgt).item_double() == a);
  CHECK(a != eval_loss);
}

// ---------------------------------------------------------------------------------------------
// Gradient checks (float64, small V)

TEST_CASE("adaptive: float64 gradient checks of AdaptiveInput", "[nn][adaptive]") {
  Generator gen(6);
  for (bool project_band0 : {true, false}) {
    INFO("project_band0 " << project_band0);
    AdaptiveInput layer({.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .project_band0 = project_band0},
                        gen);
    layer.to(DType::Float64);
    const Tensor tok = tokens({5, 2, 17, 29, 8, 0, 19, 9}, {2, 4});
    check_gradients([&] { return layer.forward(tok); }, with_parameters(layer));
    // With a padding index the padding row gets no gradient (the finite differences would see
    // it, as in PyTorch: the row is read but frozen), every other row the same as without.
    AdaptiveInput padded({.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .project_band0 = project_band0,
                          .padding_idx = 2},
                         gen);
    padded.to(DType::Float64);
    backward(sum(padded.forward(tok)));
    CHECK(max_abs(select(padded.embedding(0).grad(), 0, 2)) == 0.0);
    CHECK(max_abs(select(padded.embedding(0).grad(), 0, 5)) > 0.0);
  }
}

TEST_CASE("adaptive: float64 gradient checks of AdaptiveSoftmax (untied, tied, narrow tied)", "[nn][adaptive]") {
  Generator gen(7);
  const Ints target{0, 9, 29, -100, 17, 7, 18, 3};
  const Tensor tgt = tokens(target, {8});
  const AdaptiveInputConfig in{.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2};
  SECTION("untied with biases") {
    AdaptiveSoftmax layer({.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .head_bias = true,
                           .tail_bias = true},
                          nullptr, gen);
    layer.to(DType::Float64);
    randomise(layer, gen);
    Tensor hidden = random_leaf({8, 6}, gen);
    const auto wrt = with_parameters(layer, {{"hidden", hidden}});
    check_gradients([&] { return layer.loss(hidden, tgt, Reduction::None); }, wrt);
    check_gradients([&] { return layer.log_prob(hidden); }, wrt);
  }
  SECTION("tied tables and projections") {
    auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(
        in, AdaptiveSoftmaxConfig{.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .tie_weights = true,
                                  .tie_projections = true},
        true, gen);
    io->to(DType::Float64);
    randomise(*io, gen);
    Tensor hidden = random_leaf({8, 6}, gen);
    const auto wrt = with_parameters(*io, {{"hidden", hidden}});
    const Tensor tok = tokens({5, 2, 17, 29}, {4});
    // Input and output share tensors: both paths contribute to one gradient.
    check_gradients([&] { return add(io->output->loss(hidden, tgt, Reduction::Mean), sum(io->input->forward(tok))); },
                    wrt);
  }
  SECTION("tied with a narrower softmax (extra head projection, own tail projections)") {
    auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(
        in, AdaptiveSoftmaxConfig{.vocab = 30, .dim = 4, .cutoffs = {8, 18}, .factor = 2, .head_bias = true,
                                  .tie_weights = true},
        true, gen);
    io->to(DType::Float64);
    randomise(*io, gen);
    Tensor hidden = random_leaf({8, 4}, gen);
    const auto wrt = with_parameters(*io->output, {{"hidden", hidden}});
    check_gradients([&] { return io->output->loss(hidden, tgt, Reduction::Sum); }, wrt);
    check_gradients([&] { return io->output->log_prob(hidden); }, wrt);
  }
}

TEST_CASE("adaptive: float64 gradient checks of the projected (Transformer-XL) form", "[nn][adaptive]") {
  Generator gen(8);
  for (ProjectedTying tying : {ProjectedTying::HeadShared, ProjectedTying::TailsShared, ProjectedTying::None}) {
    INFO("tying " << static_cast<int>(tying));
    const ProjectedAdaptiveConfig cfg{.vocab = 30, .dim = 4, .proj_dim = 6, .cutoffs = {8, 18}, .projections = tying};
    auto io = make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(cfg, cfg, true, gen);
    io->to(DType::Float64);
    randomise(*io, gen);
    Tensor hidden = random_leaf({7, 6}, gen);
    const Tensor tgt = tokens({0, 9, 29, -100, 17, 7, 18}, {7});
    const Tensor tok = tokens({5, 3, 17, 29}, {2, 2});
    const auto wrt = with_parameters(*io, {{"hidden", hidden}});
    check_gradients([&] { return add(io->output->loss(hidden, tgt), sum(io->input->forward(tok))); }, wrt);
  }
}

// ---------------------------------------------------------------------------------------------
// Emulated device

TEST_CASE("adaptive: emulated device equals the CPU", "[nn][adaptive]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(9);
  const Ints target{0, 9, 29, -100, 17, 7, 18, 3, 25, 12, 11};
  const Tensor tgt = tokens(target, {11});
  const Tensor tok = tokens({5, 2, 17, 29, 8, 0}, {2, 3});
  const Tensor hidden = rand_uniform({11, 8}, -1, 1, {}, gen);
  std::vector<std::vector<double>> results[2];
  for (int k = 0; k < 2; ++k) {
    const Device d = k == 0 ? Device::cpu() : Device::emu();
    Generator init(10);
    auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(
        AdaptiveInputConfig{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .padding_idx = 1},
        AdaptiveSoftmaxConfig{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .head_bias = true,
                              .tie_weights = true, .tie_projections = true},
        true, init);
    io->to(d);
    Tensor h = copy_to_device(hidden, d).set_requires_grad();
    const Tensor loss = io->output->loss(h, copy_to_device(tgt, d));
    const Tensor emb = io->input->forward(copy_to_device(tok, d));
    backward(add(loss, sum(emb)));
    results[k].push_back(values(loss));
    results[k].push_back(values(emb));
    results[k].push_back(values(io->output->log_prob(h)));
    results[k].push_back(values(h.grad()));
    for (const auto& [name, p] : io->named_parameters()) results[k].push_back(values(p.grad()));
  }
  REQUIRE(results[0].size() == results[1].size());
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    INFO("result " << i);
    check_close(results[1][i], results[0][i], 1e-5, 1e-5);
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST_CASE("adaptive: bad configurations and inputs raise named errors", "[nn][adaptive]") {
  REQUIRE_THROWS_WITH(AdaptiveInput({.vocab = 30, .dim = 8, .cutoffs = {18, 8}}),
                      Contains("AdaptiveInput: cutoffs must increase strictly within (0, 30), got 8 after 18"));
  REQUIRE_THROWS_WITH(AdaptiveInput({.vocab = 30, .dim = 8, .cutoffs = {8, 40}}),
                      Contains("AdaptiveInput: cutoffs must increase strictly within (0, 30), got 40 after 8"));
  REQUIRE_THROWS_WITH(AdaptiveInput({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 0.5}),
                      Contains("AdaptiveInput: factor must be at least 1, got 0.5"));
  REQUIRE_THROWS_WITH(AdaptiveInput({.vocab = 30, .dim = 2, .cutoffs = {8, 18}, .factor = 2}),
                      Contains("AdaptiveInput: band 2 would be floor(2 / 2^2) = 0 wide"));
  REQUIRE_THROWS_WITH(AdaptiveInput({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2, .padding_idx = 9}),
                      Contains("AdaptiveInput: padding_idx 9 must be -1 or a shortlist word in [0, 8)"));
  // A trailing V is accepted (fairseq appends it itself).
  CHECK(AdaptiveInput({.vocab = 30, .dim = 8, .cutoffs = {8, 18, 30}, .factor = 2}).bands().bounds == Ints{8, 18, 30});
  AdaptiveInput in({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2});
  REQUIRE_THROWS_WITH(in.forward(tokens({3, 30}, {2})), Contains("AdaptiveInput: target 30 out of range for 30 classes"));
  REQUIRE_THROWS_WITH(in.forward(zeros({2})), Contains("AdaptiveInput: tokens must be an int32 or int64 tensor"));
  REQUIRE_THROWS_WITH(AdaptiveSoftmax({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .tie_weights = true}),
                      Contains("AdaptiveSoftmax: tie_weights / tie_projections need the AdaptiveInput to tie to"));
  REQUIRE_THROWS_WITH(AdaptiveSoftmax({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 4, .tie_weights = true},
                                      &in),
                      Contains("AdaptiveSoftmax: factor 4 differs from the tied input's 2"));
  REQUIRE_THROWS_WITH(AdaptiveSoftmax({.vocab = 30, .dim = 8, .cutoffs = {8, 20}, .factor = 2, .tie_weights = true},
                                      &in),
                      Contains("AdaptiveSoftmax: cutoffs differ from the tied input's"));
  REQUIRE_THROWS_WITH(
      AdaptiveSoftmax({.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .tie_projections = true}, &in),
      Contains("AdaptiveSoftmax: tie_projections needs the input width 6 to equal the tied input's width 8"));
  REQUIRE_THROWS_WITH(AdaptiveSoftmax({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .dropout = 1.5}),
                      Contains("AdaptiveSoftmax: dropout probability 1.5 is outside [0, 1]"));
  AdaptiveSoftmax out({.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2});
  REQUIRE_THROWS_WITH(out.loss(zeros({3, 7}), tokens({1, 2, 3}, {3})),
                      Contains("AdaptiveSoftmax: expected hidden [..., 8], got [3,7]"));
  REQUIRE_THROWS_WITH(out.loss(zeros({3, 8}), tokens({1, 2}, {2})),
                      Contains("AdaptiveSoftmax: target of shape [2] does not match hidden of shape [3,8]"));
  REQUIRE_THROWS_WITH(out.loss(zeros({2, 8}), tokens({1, 31}, {2})),
                      Contains("AdaptiveSoftmax: target 31 out of range for 30 classes"));
  const ProjectedAdaptiveConfig cfg{.vocab = 30, .dim = 4, .proj_dim = 6, .cutoffs = {8, 18}};
  REQUIRE_THROWS_WITH(ProjectedAdaptiveSoftmax(cfg),
                      Contains("ProjectedAdaptiveSoftmax: tie_weights / shared projections need the"));
  ProjectedAdaptiveInput pin(cfg);
  ProjectedAdaptiveConfig other = cfg;
  other.proj_dim = 8;
  REQUIRE_THROWS_WITH(ProjectedAdaptiveSoftmax(other, &pin),
                      Contains("ProjectedAdaptiveSoftmax: V, n, d_proj and cutoffs must equal the tied input's (30, 4, 6)"));
  REQUIRE_THROWS_WITH(ProjectedAdaptiveInput({.vocab = 30, .dim = 0, .proj_dim = 6}),
                      Contains("ProjectedAdaptiveInput: widths must be positive, got n = 0 and d_proj = 6"));
}
