// Adaptive input and adaptive softmax (nn/adaptive.h): parameter counts of the paper
// configurations (spec §5.2, §5.3), computed here from the spec's formulas; band layout; forward
// semantics by hand; the fused loss against -log_prob[target]; log-prob rows summing to 1; tying;
// float64 gradient checks of every layer and option; the emulated device against the CPU; errors.
//
// The full-size layers (up to 110 M parameters) are built with skip_init: their parameters are
// allocated but never written, so building one costs a few milliseconds and touches no memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/adaptive.h"
#include "nn_test_util.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::values;
using Ints = std::vector<std::int64_t>;

namespace {

// A model holding an input layer and a softmax (tied tensors counted once, as in a real LM).
template <class In, class Out>
struct LanguageModelIO : Module {
  std::shared_ptr<In> input;
  std::shared_ptr<Out> output;
  LanguageModelIO() : Module("LanguageModelIO") {}
};

template <class In, class Out, class InCfg, class OutCfg>
std::shared_ptr<LanguageModelIO<In, Out>> make_io(const InCfg& in_cfg, const OutCfg& out_cfg, bool tie,
                                                  Generator& gen) {
  auto m = std::make_shared<LanguageModelIO<In, Out>>();
  m->input = m->register_module("input", std::make_shared<In>(in_cfg, gen));
  m->output = m->register_module("output", std::make_shared<Out>(out_cfg, tie ? m->input.get() : nullptr, gen));
  return m;
}

// Every parameter replaced by U(-0.5, 0.5) noise, so zero biases cannot hide a wrong gradient.
void randomise(Module& m, Generator& gen) {
  NoGradGuard g;
  for (const auto& [name, p] : m.named_parameters())
    copy_(p, rand_uniform(p.shape(), -0.5, 0.5, {.dtype = p.dtype()}, gen));
}

std::vector<std::pair<std::string, Tensor>> named(const Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace_back(name, p);
  return out;
}

Tensor tokens(const Ints& v, Shape shape) { return from_vector<std::int64_t>(v, std::move(shape)); }

// -log_prob[r, t_r] per row (0 for ignored rows), from log_prob() alone.
std::vector<double> nll_from_log_prob(const Tensor& lp, const Ints& target, std::int64_t ignore = -100) {
  const std::vector<double> v = values(lp);
  const std::int64_t vocab = lp.size(-1);
  std::vector<double> out;
  for (std::size_t r = 0; r < target.size(); ++r)
    out.push_back(target[r] == ignore ? 0.0 : -v[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(target[r])]);
  return out;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(a[i] - b[i]) <= tol * (1.0 + std::abs(b[i])));
  }
}

// Rounds to two decimals in millions, as the paper prints counts.
double millions(std::int64_t n) { return std::round(double(n) / 1e4) / 100.0; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parameter counts (spec §5.2, §5.3)

TEST_CASE("adaptive: DeFINE Table 1a input-output counts (tied, factor 4, no band-0 projection)", "[nn][adaptive]") {
  const std::int64_t V = 267735;
  const Ints cutoffs{20000, 40000, 200000};
  // Spec §5.3: rows 20000, 20000, 160000, 67735 at widths n, n/4, n/16, n/64; projections of
  // bands 1..3 (tied between input and softmax); 3 cluster logits.
  const auto formula = [&](std::int64_t n) {
    return 20000 * n + 20000 * (n / 4) + 160000 * (n / 16) + 67735 * (n / 64) + (n / 4 + n / 16 + n / 64) * n + 3 * n;
  };
  // n, exact count, the paper's figure in millions.
  const std::vector<std::tuple<std::int64_t, std::int64_t, double>> expected = {
      {256, 9'253'212, 9.25}, {384, 13'895'946, 13.90}, {512, 18'549'432, 18.55}};
  for (const auto& [n, count, paper] : expected) {
    INFO("n = " << n);
    Generator gen(1);
    const AdaptiveInputConfig in{.vocab = V, .dim = n, .cutoffs = cutoffs, .factor = 4, .project_band0 = false,
                                 .skip_init = true};
    const AdaptiveSoftmaxConfig out{.vocab = V, .dim = n, .cutoffs = cutoffs, .factor = 4, .tie_weights = true,
                                    .tie_projections = true, .skip_init = true};
    auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(in, out, true, gen);
    CHECK(io->num_parameters() == count);
    CHECK(io->num_parameters() == formula(n));
    CHECK(millions(io->num_parameters()) == paper);
    CHECK(io->output->num_parameters() - io->input->num_parameters() == 3 * n);  // only the cluster logits
    CHECK(io->input->bands().dims == Ints{n, n / 4, n / 16, n / 64});
    CHECK(io->input->bands().rows == Ints{20000, 20000, 160000, 67735});
  }
}

TEST_CASE("adaptive: DeFINE Table 2 input-output counts (Transformer-XL projected form)", "[nn][adaptive]") {
  const std::int64_t V = 267735;
  const Ints cutoffs{20000, 40000, 200000};
  // Spec §5.3: one V x n table, softmax bias V, cluster weights 3n + 3, and four n x d_proj
  // projections when n != d_proj (none when equal).
  const auto formula = [&](std::int64_t n, std::int64_t d_proj) {
    return V * n + V + (n != d_proj ? 4 * n * d_proj : 0) + 3 * n + 3;
  };
  struct Row {
    std::int64_t n, d_proj, count;
    double paper;
  };
  // n = 410 is the Transformer-XL baseline (d_model 410): its 110.04 M has no projections, so its
  // d_proj is 410 (with d_proj = 384 it is 110,670,078 = 110.67 M, not the paper's figure).
  const std::vector<Row> rows = {{256, 384, 69'201'882, 69.20},
                                 {128, 384, 34'734'810, 34.73},
                                 {64, 384, 17'501'274, 17.50},
                                 {384, 384, 103'079'130, 103.08},
                                 {410, 410, 110'040'318, 110.04},
                                 {410, 384, 110'670'078, 110.67}};
  for (const Row& r : rows) {
    INFO("n = " << r.n << ", d_proj = " << r.d_proj);
    Generator gen(1);
    const ProjectedAdaptiveConfig cfg{.vocab = V, .dim = r.n, .proj_dim = r.d_proj, .cutoffs = cutoffs,
                                      .skip_init = true};
    auto io = make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(cfg, cfg, true, gen);
    CHECK(io->num_parameters() == r.count);
    CHECK(io->num_parameters() == formula(r.n, r.d_proj));
    CHECK(millions(io->num_parameters()) == r.paper);
  }
  // Which projections are shared (n = 256): HeadShared (default) P_0 = input's, P_1..P_3 own.
  Generator gen(1);
  ProjectedAdaptiveConfig cfg{.vocab = V, .dim = 256, .proj_dim = 384, .cutoffs = cutoffs, .skip_init = true};
  auto head_shared = make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(cfg, cfg, true, gen);
  CHECK(head_shared->output->projection(0).impl() == head_shared->input->projection().impl());
  for (std::size_t c = 1; c < 4; ++c) CHECK(head_shared->output->projection(c).impl() != head_shared->input->projection().impl());
  CHECK(head_shared->output->parameter("weight").impl() == head_shared->input->weight().impl());
  // TailsShared (Transformer-XL train.py): two distinct projections; None: five.
  cfg.projections = ProjectedTying::TailsShared;
  CHECK(make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(cfg, cfg, true, gen)->num_parameters() ==
        V * 256 + V + 2 * 256 * 384 + 3 * 256 + 3);
  cfg.projections = ProjectedTying::None;
  CHECK(make_io<ProjectedAdaptiveInput, ProjectedAdaptiveSoftmax>(cfg, cfg, true, gen)->num_parameters() ==
        V * 256 + V + 5 * 256 * 384 + 3 * 256 + 3);
}

TEST_CASE("adaptive: DeLighT WT-103 adaptive input and tied softmax head (spec §5.2)", "[nn][adaptive]") {
  const std::int64_t V = 267744;
  const Ints cutoffs{20000, 60000};
  // 20000 x 128 + 40000 x 64 + 207744 x 32 + (128 + 64 + 32) x 128 (band 0 projected too).
  const std::int64_t input_count = 20000 * 128 + 40000 * 64 + 207744 * 32 + (128 + 64 + 32) * 128;
  Generator gen(1);
  const AdaptiveInputConfig in{.vocab = V, .dim = 128, .cutoffs = cutoffs, .factor = 2, .skip_init = true};
  const AdaptiveSoftmaxConfig out{.vocab = V, .dim = 128, .cutoffs = cutoffs, .factor = 2, .dropout = 0.1,
                                  .tie_weights = true, .tie_projections = true, .skip_init = true};
  auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(in, out, true, gen);
  CHECK(io->input->num_parameters() == input_count);
  CHECK(io->input->num_parameters() == 11'796'480);
  CHECK(io->num_parameters() == 11'796'480 + 2 * 128);  // the softmax adds only the 2 cluster logits
  CHECK(io->output->parameter("head.word_weight").impl() == io->input->embedding(0).impl());
  CHECK(io->output->parameter("tails.1.weight").impl() == io->input->embedding(2).impl());
  CHECK(io->output->parameter("tails.1.projection").impl() == io->input->projection(2).impl());
  CHECK(io->input->named_parameters().keys() ==
        std::vector<std::string>{"bands.0.weight", "bands.0.projection", "bands.1.weight", "bands.1.projection",
                                 "bands.2.weight", "bands.2.projection"});
}

TEST_CASE("adaptive: small counts of every option", "[nn][adaptive]") {
  Generator gen(2);
  // V = 30, cutoffs 8, 18, n = 8, factor 2: dims 8, 4, 2; rows 8, 10, 12.
  const AdaptiveInputConfig in{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2};
  CHECK(AdaptiveInput(in, gen).num_parameters() == 8 * 8 + 10 * 4 + 12 * 2 + (8 + 4 + 2) * 8);
  AdaptiveInputConfig no_band0 = in;
  no_band0.project_band0 = false;
  CHECK(AdaptiveInput(no_band0, gen).num_parameters() == 8 * 8 + 10 * 4 + 12 * 2 + (4 + 2) * 8);
  // Untied softmax: head n (c_0 + T) (+ c_0 + T), tails n dim + dim rows (+ rows).
  AdaptiveSoftmaxConfig out{.vocab = 30, .dim = 8, .cutoffs = {8, 18}, .factor = 2};
  CHECK(AdaptiveSoftmax(out, nullptr, gen).num_parameters() == 8 * 10 + (8 * 4 + 4 * 10) + (8 * 2 + 2 * 12));
  out.head_bias = out.tail_bias = true;
  CHECK(AdaptiveSoftmax(out, nullptr, gen).num_parameters() ==
        8 * 10 + 10 + (8 * 4 + 4 * 10 + 10) + (8 * 2 + 2 * 12 + 12));
  // Tied with a softmax 6 wide (the input is 8): the extra Linear(6 -> 8) for the head words, own
  // tail projections 6 -> 4 and 6 -> 2 into the input's band widths.
  AdaptiveSoftmaxConfig narrow{.vocab = 30, .dim = 6, .cutoffs = {8, 18}, .factor = 2, .tie_weights = true};
  auto io = make_io<AdaptiveInput, AdaptiveSoftmax>(in, narrow, true, gen);
  CHECK(io->num_parameters() - io->input->num_parameters() == 8 * 6 + 2 * 6 + 6 * 4 + 6 * 2);
}

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
    check_close(values(losses[k].second(Reduction::None)), want, 1e-12);
    double total = 0;
    for (double w : want) total += w;
    check_close(values(losses[k].second(Reduction::Sum)), {total}, 1e-12);
    check_close(values(losses[k].second(Reduction::Mean)), {total / double(n_rows - 1)}, 1e-12);
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
  check_close(values(untied.log_prob(hidden)), values(concat(pieces, 1)), 1e-12);
  // An empty batch: loss 0 (mean over no rows), log-probs [0, V].
  CHECK(untied.loss(zeros({0, 8}, {.dtype = DType::Float64}), tokens({}, {0})).item_double() == 0.0);
  CHECK(untied.log_prob(zeros({0, 8}, {.dtype = DType::Float64})).shape() == Shape{0, 30});
  CHECK(io->input->forward(tokens({}, {0, 3})).shape() == Shape{0, 3, 8});
  // 3-d hidden: [2, 5, n] -> [2, 5, V], loss with [2, 5] targets.
  const Tensor h3 = rand_uniform({2, 5, 8}, -1, 1, {DType::Float64}, gen);
  const Ints t3{1, 2, 3, 9, 20, 29, 0, 8, 18, 17};
  CHECK(untied.log_prob(h3).shape() == Shape{2, 5, 30});
  check_close(values(untied.loss(h3, tokens(t3, {2, 5}), Reduction::None)),
              nll_from_log_prob(reshape(untied.log_prob(h3), {10, 30}), t3), 1e-12);
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
    check_gradients([&] { return layer.forward(tok); }, named(layer));
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
    Tensor hidden = rand_uniform({8, 6}, -1, 1, {DType::Float64}, gen).set_requires_grad();
    auto wrt = named(layer);
    wrt.emplace_back("hidden", hidden);
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
    Tensor hidden = rand_uniform({8, 6}, -1, 1, {DType::Float64}, gen).set_requires_grad();
    auto wrt = named(*io);
    wrt.emplace_back("hidden", hidden);
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
    Tensor hidden = rand_uniform({8, 4}, -1, 1, {DType::Float64}, gen).set_requires_grad();
    auto wrt = named(*io->output);
    wrt.emplace_back("hidden", hidden);
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
    Tensor hidden = rand_uniform({7, 6}, -1, 1, {DType::Float64}, gen).set_requires_grad();
    const Tensor tgt = tokens({0, 9, 29, -100, 17, 7, 18}, {7});
    const Tensor tok = tokens({5, 3, 17, 29}, {2, 2});
    auto wrt = named(*io);
    wrt.emplace_back("hidden", hidden);
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
    check_close(results[1][i], results[0][i], 1e-5);
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
