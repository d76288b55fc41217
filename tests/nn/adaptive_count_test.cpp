// Adaptive input and adaptive softmax (nn/adaptive.h), parameter counts: the paper
// configurations (spec §5.2, §5.3), computed here from the spec's formulas, and small counts of
// every option. Semantics, gradients, the device and errors are in adaptive_test.cpp.
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
#include "support/adaptive.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::make_io;
using Ints = std::vector<std::int64_t>;

namespace {

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
