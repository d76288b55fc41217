// Adaptive-softmax family: harness cases for the fused loss (head + per-tail logits of only the
// rows whose target falls in that tail) and the full log-probabilities, in every mode (cpu: fast
// path vs reference; grad: float64 Jacobian vs central differences; emu: the CUDA kernels on the
// emulator vs the reference). Odd N (1, 31, 33), cutoffs that leave tails empty, ignore_index rows,
// reductions None/Sum/Mean, int32 targets, non-contiguous logits, rows wider than a warp's 1024.
// Then: equality with the generic ops the fused loss replaces, the partition itself, and errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "harness/op_harness.h"
#include "kernels/adaptive_softmax.h"
#include "kernels/backend.h"
#include "kernels/devices.h"

using namespace define;
using define::test::InputSpec;
using define::test::OpCase;
using V = const std::vector<Tensor>&;
using Bounds = std::vector<std::int64_t>;
using Catch::Contains;

namespace {

InputSpec logits(Shape shape, bool non_contiguous = false) {
  InputSpec s;
  s.shape = std::move(shape);
  s.lo = -3.0;
  s.hi = 3.0;
  s.non_contiguous = non_contiguous;
  return s;
}

InputSpec targets(const std::vector<std::int64_t>& t, DType dtype = DType::Int64) {
  InputSpec s;
  s.shape = {static_cast<std::int64_t>(t.size())};
  s.fill = InputSpec::Fill::Fixed;
  s.grad = false;
  s.index_dtype = dtype;
  for (std::int64_t v : t) s.values.push_back(double(v));
  return s;
}

// Deterministic targets for n rows drawn from `words` (cycled with a stride so neighbours differ),
// every `ignore_every`-th row set to ignore_index (0: none).
std::vector<std::int64_t> make_targets(std::int64_t n, const std::vector<std::int64_t>& words,
                                       std::int64_t ignore_every = 0, std::int64_t ignore_index = -100) {
  std::vector<std::int64_t> t;
  for (std::int64_t r = 0; r < n; ++r) {
    if (ignore_every > 0 && r % ignore_every == ignore_every - 1) t.push_back(ignore_index);
    else t.push_back(words[static_cast<std::size_t>((r * 7 + 3) % static_cast<std::int64_t>(words.size()))]);
  }
  return t;
}

// Rows per tail for these targets (independent of the code under test).
std::vector<std::int64_t> tail_counts(const std::vector<std::int64_t>& t, const Bounds& b, std::int64_t ignore) {
  std::vector<std::int64_t> n(b.size() - 1, 0);
  for (std::int64_t v : t) {
    if (v == ignore || v < b[0]) continue;
    for (std::size_t i = 0; i + 1 < b.size(); ++i)
      if (v >= b[i] && v < b[i + 1]) ++n[i];
  }
  return n;
}

std::int64_t head_width(const Bounds& b) { return b[0] + static_cast<std::int64_t>(b.size()) - 1; }

struct LossSpec {
  std::string name;
  Bounds bounds;
  std::vector<std::int64_t> target;
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;
  bool gradcheck = true;
  bool non_contiguous = false;
  DType target_dtype = DType::Int64;
};

// inputs: head, tail 0 .. tail T-1, target. The forward partitions the rows itself, as a layer does.
OpCase loss_case(const LossSpec& s) {
  const std::int64_t n = static_cast<std::int64_t>(s.target.size());
  OpCase c{.name = "adaptive_softmax_loss/" + s.name,
           .inputs = {logits({n, head_width(s.bounds)}, s.non_contiguous)},
           .forward = {}};
  const std::vector<std::int64_t> counts = tail_counts(s.target, s.bounds, s.ignore_index);
  for (std::size_t i = 0; i + 1 < s.bounds.size(); ++i)
    c.inputs.push_back(logits({counts[i], s.bounds[i + 1] - s.bounds[i]}, s.non_contiguous));
  c.inputs.push_back(targets(s.target, s.target_dtype));
  c.forward = [b = s.bounds, red = s.reduction, ig = s.ignore_index](V in) {
    const Tensor& target = in.back();
    const AdaptivePartition part = adaptive_partition(target, b, ig);
    const std::vector<Tensor> tails(in.begin() + 1, in.end() - 1);
    const std::vector<Tensor> rows(part.rows.begin() + 1, part.rows.end());
    return adaptive_softmax_loss(in[0], tails, rows, target, b, ig, red);
  };
  c.gradcheck = s.gradcheck;
  return c;
}

OpCase log_prob_case(std::string name, std::int64_t n, const Bounds& b, bool gradcheck = true,
                     bool non_contiguous = false) {
  OpCase c{.name = "adaptive_log_softmax/" + std::move(name),
           .inputs = {logits({n, head_width(b)}, non_contiguous)},
           .forward = {}};
  for (std::size_t i = 0; i + 1 < b.size(); ++i) c.inputs.push_back(logits({n, b[i + 1] - b[i]}, non_contiguous));
  c.forward = [b](V in) { return adaptive_log_softmax(in[0], std::vector<Tensor>(in.begin() + 1, in.end()), b); };
  c.gradcheck = gradcheck;
  return c;
}

std::vector<std::int64_t> range(std::int64_t lo, std::int64_t hi, std::int64_t step = 1) {
  std::vector<std::int64_t> v;
  for (std::int64_t w = lo; w < hi; w += step) v.push_back(w);
  return v;
}

std::vector<std::int64_t> join(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("ops: adaptive_softmax_loss", "[ops][harness][adaptive_softmax][family:adaptive_softmax]") {
  const Bounds small{4, 7, 12};  // shortlist 4, tails [4, 7) and [7, 12); head 6 wide
  const std::vector<std::int64_t> all_words = range(0, 12);
  define::test::run_op_cases({
      loss_case({.name = "N1_shortlist", .bounds = small, .target = {2}}),
      loss_case({.name = "N1_tail1", .bounds = small, .target = {9}}),
      loss_case({.name = "N1_ignored", .bounds = small, .target = {-100}}),
      loss_case({.name = "N5_mean", .bounds = small, .target = {0, 5, 11, 3, 7}}),
      loss_case({.name = "N5_sum", .bounds = small, .target = {0, 5, 11, 3, 7}, .reduction = Reduction::Sum}),
      loss_case({.name = "N5_none", .bounds = small, .target = {0, 5, 11, 3, 7}, .reduction = Reduction::None}),
      loss_case({.name = "N6_ignored_mean", .bounds = small, .target = {6, -100, 1, 10, -100, 4}}),
      loss_case({.name = "N6_ignored_none",
                 .bounds = small,
                 .target = {6, -100, 1, 10, -100, 4},
                 .reduction = Reduction::None}),
      loss_case({.name = "custom_ignore_index", .bounds = small, .target = {6, 3, 1, 3, 9}, .ignore_index = 3}),
      loss_case({.name = "all_ignored", .bounds = small, .target = {-100, -100, -100}}),
      loss_case({.name = "only_shortlist_rows_tails_empty", .bounds = small, .target = {0, 1, 2, 3, 1}}),
      loss_case({.name = "tail0_empty", .bounds = small, .target = {0, 8, 11, 2, 7}, .reduction = Reduction::Sum}),
      loss_case({.name = "no_tails", .bounds = {9}, .target = {0, 8, 4, -100, 2}}),
      loss_case({.name = "one_word_tails", .bounds = {3, 4, 5}, .target = {3, 4, 0, 4, 2}}),
      loss_case({.name = "int32_target", .bounds = small, .target = {0, 5, 11, 3, 7}, .target_dtype = DType::Int32}),
      loss_case({.name = "non_contiguous", .bounds = small, .target = {6, 5, 1, 10, 9, 4}, .non_contiguous = true}),
  });
}

TEST_CASE("ops: adaptive_softmax_loss at odd sizes and wide rows",
          "[ops][harness][adaptive_softmax][family:adaptive_softmax]") {
  // V = 300: shortlist 40, tails of 60, 100 and 100 words; targets avoid tail 1 ([100, 200)).
  const Bounds b{40, 100, 200, 300};
  const std::vector<std::int64_t> words = join(join(range(0, 40, 3), range(40, 100, 7)), range(200, 300, 11));
  define::test::run_op_cases({
      loss_case({.name = "N31_tail1_empty_ignored", .bounds = b, .target = make_targets(31, words, 5)}),
      loss_case({.name = "N33_none",
                 .bounds = b,
                 .target = make_targets(33, words, 4),
                 .reduction = Reduction::None,
                 .gradcheck = false}),
      loss_case({.name = "N33_all_tails",
                 .bounds = b,
                 .target = make_targets(33, range(0, 300, 4), 6),
                 .reduction = Reduction::Sum,
                 .gradcheck = false}),
      loss_case({.name = "N33_non_contiguous",
                 .bounds = b,
                 .target = make_targets(33, range(1, 300, 5)),
                 .gradcheck = false,
                 .non_contiguous = true}),
      // Head 1027 wide and a 1100-word tail: the one-block-per-row kernels.
      loss_case({.name = "N7_wide_head_and_tail",
                 .bounds = {1025, 1030, 2130},
                 .target = {3, 1026, 2000, -100, 1029, 1500, 1024},
                 .gradcheck = false}),
  });
}

TEST_CASE("ops: adaptive_log_softmax", "[ops][harness][adaptive_softmax][family:adaptive_softmax]") {
  define::test::run_op_cases({
      log_prob_case("N1", 1, {4, 7, 12}),
      log_prob_case("N3_no_tails", 3, {6}),
      log_prob_case("N4_one_word_tails", 4, {3, 4, 5}),
      log_prob_case("N3_non_contiguous", 3, {4, 7, 12}, true, true),
      log_prob_case("N31_V300", 31, {40, 100, 200, 300}, false),
      log_prob_case("N33_V300_non_contiguous", 33, {40, 100, 200, 300}, false, true),
      log_prob_case("N5_wide_head_and_tail", 5, {1025, 1030, 2130}, false),
  });
}

namespace {

// The composition the fused loss replaces: full head log_softmax, then for each tail the rows of
// its words (index_select), their log_softmax, and gathers of the cluster and word log-probs.
Tensor loss_by_generic_ops(const Tensor& head, const std::vector<Tensor>& tails, const std::vector<Tensor>& rows,
                           const std::vector<std::int64_t>& target, const Bounds& b, Reduction reduction) {
  const std::int64_t n = head.size(0);
  const Tensor head_lp = log_softmax(head, 1);
  std::vector<std::int64_t> slot(target.size());
  for (std::size_t r = 0; r < target.size(); ++r) {
    const std::int64_t t = target[r] < 0 ? 0 : target[r];
    slot[r] = t < b[0] ? t : b[0] + (std::upper_bound(b.begin(), b.end(), t) - b.begin() - 1);
  }
  Tensor nll = neg(reshape(gather(head_lp, 1, from_vector<std::int64_t>(slot, {n, 1})), {n}));
  for (std::size_t i = 0; i < tails.size(); ++i) {
    if (tails[i].size(0) == 0) continue;
    const std::vector<std::int64_t> r = rows[i].to_vector<std::int64_t>();
    std::vector<std::int64_t> local;
    for (std::int64_t k : r) local.push_back(target[static_cast<std::size_t>(k)] - b[i]);
    const std::int64_t m = static_cast<std::int64_t>(r.size());
    const Tensor tail_lp = gather(log_softmax(tails[i], 1), 1, from_vector<std::int64_t>(local, {m, 1}));
    // Scatter the tail terms back to their rows.
    nll = scatter_add(nll, 0, rows[i], neg(reshape(tail_lp, {m})));
  }
  std::vector<double> keep;
  for (std::int64_t t : target) keep.push_back(t == -100 ? 0.0 : 1.0);
  nll = mul(nll, from_vector<double>(keep, {n}));
  if (reduction == Reduction::None) return nll;
  const Tensor total = sum(nll);
  double count = 0;
  for (double k : keep) count += k;
  return reduction == Reduction::Sum ? total : div(total, std::max(count, 1.0));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = define::test::to_doubles(a), y = define::test::to_doubles(b);
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("adaptive_softmax: fused loss equals the generic-op composition and -log_prob[target]",
          "[adaptive_softmax][family:adaptive_softmax]") {
  REQUIRE(kernels::register_devices().emu);
  const Bounds b{40, 100, 200, 300};
  const std::vector<std::int64_t> target = make_targets(33, range(0, 300, 4), 6);
  const std::vector<std::int64_t> counts = tail_counts(target, b, -100);
  Generator gen(5);
  for (Device d : {Device::cpu(), Device::emu()}) {
    for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
      INFO(d.str() << " reduction " << static_cast<int>(red));
      Tensor head = copy_to_device(rand_uniform({33, head_width(b)}, -3, 3, {DType::Float64}, gen), d);
      std::vector<Tensor> tails, tails_full;
      for (std::size_t i = 0; i < counts.size(); ++i)
        tails.push_back(copy_to_device(rand_uniform({counts[i], b[i + 1] - b[i]}, -3, 3, {DType::Float64}, gen), d));
      head.set_requires_grad();
      for (Tensor& t : tails) t.set_requires_grad();
      const Tensor tgt = from_vector<std::int64_t>(target, {33}, d);
      const AdaptivePartition part = adaptive_partition(tgt, b);
      const std::vector<Tensor> rows(part.rows.begin() + 1, part.rows.end());
      const Tensor fused = adaptive_softmax_loss(head, tails, rows, tgt, b, -100, red);
      std::vector<Tensor> leaves{head};
      leaves.insert(leaves.end(), tails.begin(), tails.end());
      const Tensor up = copy_to_device(rand_uniform(fused.shape(), -1, 1, {DType::Float64}, gen), d);
      const std::vector<Tensor> g_fused = grad(fused, leaves, up);
      // The generic composition runs on the CPU.
      std::vector<Tensor> cpu_leaves, cpu_rows;
      for (const Tensor& t : leaves) cpu_leaves.push_back(copy_to_device(detach(t), Device::cpu()).set_requires_grad());
      for (const Tensor& r : rows) cpu_rows.push_back(copy_to_device(r, Device::cpu()));
      const Tensor generic = loss_by_generic_ops(cpu_leaves[0], std::vector<Tensor>(cpu_leaves.begin() + 1, cpu_leaves.end()),
                                                 cpu_rows, target, b, red);
      const std::vector<Tensor> g_generic = grad(generic, cpu_leaves, copy_to_device(up, Device::cpu()));
      CHECK(max_abs_diff(fused, generic) < 1e-12);
      for (std::size_t i = 0; i < leaves.size(); ++i) CHECK(max_abs_diff(g_fused[i], g_generic[i]) < 1e-12);
    }
  }
  // Loss from the full log-probabilities: every row through every tail, then -lp[target].
  Tensor head = rand_uniform({33, head_width(b)}, -3, 3, {DType::Float64}, gen);
  std::vector<Tensor> full_tails, row_tails;
  const Tensor tgt = from_vector<std::int64_t>(target, {33});
  const AdaptivePartition part = adaptive_partition(tgt, b);
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    full_tails.push_back(rand_uniform({33, b[i + 1] - b[i]}, -3, 3, {DType::Float64}, gen));
    row_tails.push_back(index_select(full_tails.back(), 0, part.rows[i + 1]));
  }
  const Tensor lp = adaptive_log_softmax(head, full_tails, b);
  const Tensor nll = nll_loss(lp, tgt, -100, Reduction::None);
  const Tensor fused = adaptive_softmax_loss(head, row_tails, std::vector<Tensor>(part.rows.begin() + 1, part.rows.end()),
                                             tgt, b, -100, Reduction::None);
  CHECK(max_abs_diff(fused, nll) < 1e-12);
  // Rows of probabilities sum to 1.
  const std::vector<double> row_sums = define::test::to_doubles(sum(exp(lp), {1}));
  for (double s : row_sums) CHECK(std::abs(s - 1.0) < 1e-12);
}

TEST_CASE("adaptive_softmax: partition is stable and complete", "[adaptive_softmax][family:adaptive_softmax]") {
  const Tensor t = from_vector<std::int64_t>({9, 0, 5, -100, 11, 3, 7, 5}, {8});
  const AdaptivePartition p = adaptive_partition(t, {4, 7, 12});
  REQUIRE(p.rows.size() == 3);
  CHECK(p.counts == std::vector<std::int64_t>{2, 2, 3});
  CHECK(p.rows[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 5});
  CHECK(p.rows[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 7});
  CHECK(p.rows[2].to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 4, 6});
  CHECK(p.local[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 3});
  CHECK(p.local[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1});
  CHECK(p.local[2].to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 4, 0});
  CHECK(p.position.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 0, 2, -1, 5, 1, 6, 3});
}

TEST_CASE("adaptive_softmax: bad input raises named errors", "[adaptive_softmax][family:adaptive_softmax]") {
  const Bounds b{4, 7, 12};
  const Tensor head = zeros({3, 6});
  const Tensor t = from_vector<std::int64_t>({9, 0, 5}, {3});
  const AdaptivePartition p = adaptive_partition(t, b);
  const std::vector<Tensor> rows{p.rows[1], p.rows[2]};
  const std::vector<Tensor> tails{zeros({1, 3}), zeros({1, 5})};
  CHECK_NOTHROW(adaptive_softmax_loss(head, tails, rows, t, b));
  REQUIRE_THROWS_WITH(adaptive_partition(from_vector<std::int64_t>({12}, {1}), b),
                      Contains("adaptive_partition: target 12 out of range for 12 classes"));
  REQUIRE_THROWS_WITH(adaptive_partition(t, {4, 4, 12}), Contains("bounds must be strictly increasing, got 4 after 4"));
  REQUIRE_THROWS_WITH(adaptive_partition(t, {0, 12}), Contains("the shortlist must hold at least one word, got c_0 = 0"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(zeros({3, 5}), tails, rows, t, b),
                      Contains("adaptive_softmax: head logits [3,5] must have c_0 + T = 4 + 2 = 6 columns"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(head, {zeros({1, 3}), zeros({2, 5})}, rows, t, b),
                      Contains("adaptive_softmax: tail 1 logits [2,5] must be [1, 5] (words [7, 12))"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(head, {zeros({1, 3})}, rows, t, b),
                      Contains("adaptive_softmax: 1 tail logits given for 2 tail clusters"));
  // Rows swapped between the tails: row 0 (target 9) listed for tail 0.
  REQUIRE_THROWS_WITH(
      adaptive_softmax_loss(head, {zeros({1, 3}), zeros({1, 5})}, {p.rows[2], p.rows[1]}, t, b),
      Contains("adaptive_softmax: row 0 (target 9) is listed for tail 0 [4, 7)"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(head, {zeros({0, 3}), zeros({1, 5})},
                                            {from_vector<std::int64_t>({}, {0}), p.rows[2]}, t, b),
                      Contains("adaptive_softmax: tail 0 lists 0 rows but 1 targets fall in [4, 7)"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(head, tails, {p.rows[1], from_vector<std::int64_t>({7}, {1})}, t, b),
                      Contains("adaptive_softmax: tail 1 lists row 7, outside [0, 3)"));
  REQUIRE_THROWS_WITH(adaptive_softmax_loss(head, {zeros({1, 3}), zeros({1, 5}, {.dtype = DType::Float64})}, rows, t, b),
                      Contains("adaptive_softmax: dtypes float32 and float64 do not match"));
  REQUIRE_THROWS_WITH(adaptive_log_softmax(head, {zeros({3, 3}), zeros({2, 5})}, b),
                      Contains("adaptive_log_prob: tail 1 logits [2,5] must be [3, 5] (words [7, 12))"));
}

TEST_CASE("adaptive_softmax: an empty batch gives a zero loss and empty gradients",
          "[adaptive_softmax][family:adaptive_softmax]") {
  const Bounds b{4, 7, 12};
  Tensor head = zeros({0, 6});
  head.set_requires_grad();
  const Tensor t = from_vector<std::int64_t>({}, {0});
  const AdaptivePartition p = adaptive_partition(t, b);
  const Tensor loss = adaptive_softmax_loss(head, {zeros({0, 3}), zeros({0, 5})}, {p.rows[1], p.rows[2]}, t, b);
  CHECK(loss.item_double() == 0.0);
  backward(loss);
  CHECK(head.grad().shape() == Shape{0, 6});
  CHECK(adaptive_log_softmax(zeros({0, 6}), {zeros({0, 3}), zeros({0, 5})}, b).shape() == Shape{0, 12});
}
