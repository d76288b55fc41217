// Optimizers, gradient clipping and learning-rate schedules (nn/optim/). Trajectories are checked
// step by step against the update formulas written out again here in plain double arithmetic
// (float64 parameters, so agreement is to rounding), then convergence, corner cases, NT-ASGD's
// trigger and averaging, state_dict round trips, hyper-parameter errors, and Adam on the emulated
// CUDA device against the CPU.
// GCC 12 flags designated initializers that leave fields at their defaults (-Wextra), which is
// exactly how option structs are meant to be used here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <vector>

#include "autograd/ops.h"
#include "kernels/devices.h"
#include "nn/optim/optim.h"

using namespace define;
using namespace define::optim;
using Catch::Contains;

namespace {

using Vec = std::vector<double>;

Tensor param(const Vec& v) { return from_vector(v).set_requires_grad(); }
void set_grad(const Tensor& p, const Vec& g) { p.set_grad(from_vector(g)); }
Vec vals(const Tensor& t) { return t.to_vector<double>(); }

void check_close(const Vec& got, const Vec& want, double rel = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(rel).margin(1e-15));
}

// Scripted gradients for three steps of a two-element parameter.
const std::vector<Vec> kGrads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}};
const Vec kStart = {1.0, -2.0};

}  // namespace

// ---------------------------------------------------------------- SGD

TEST_CASE("optim: SGD plain and with weight decay follows p -= lr * (g + wd * p)", "[optim]") {
  for (double wd : {0.0, 0.1}) {
    Tensor p = param(kStart);
    SGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .weight_decay = wd});
    Vec want = kStart;
    for (const Vec& g : kGrads) {
      set_grad(p, g);
      opt.step();
      for (int i = 0; i < 2; ++i) want[i] -= 0.1 * (g[i] + wd * want[i]);
      check_close(vals(p), want);
    }
  }
  // Literal numbers for the first step without decay: 1 - 0.1 * 0.5, -2 + 0.1 * 1.
  Tensor p = param(kStart);
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  set_grad(p, kGrads[0]);
  opt.step();
  check_close(vals(p), {0.95, -1.9});
}

TEST_CASE("optim: SGD momentum, dampening and nesterov match PyTorch's formulas", "[optim]") {
  struct Case { double mom, damp, wd; bool nesterov; };
  for (Case c : {Case{0.9, 0, 0, false}, Case{0.9, 0.3, 0.05, false}, Case{0.8, 0, 0.05, true}, Case{0.5, 1, 0, false}}) {
    CAPTURE(c.mom, c.damp, c.wd, c.nesterov);
    Tensor p = param(kStart);
    SGD opt(std::vector<Tensor>{p}, {.lr = 0.05, .momentum = c.mom, .dampening = c.damp, .weight_decay = c.wd,
                                     .nesterov = c.nesterov});
    Vec want = kStart, buf(2);
    for (std::size_t t = 0; t < kGrads.size(); ++t) {
      set_grad(p, kGrads[t]);
      opt.step();
      for (int i = 0; i < 2; ++i) {
        const double d = kGrads[t][i] + c.wd * want[i];
        buf[i] = t == 0 ? d : c.mom * buf[i] + (1 - c.damp) * d;  // first step: buf = d, undamped
        const double dir = c.nesterov ? d + c.mom * buf[i] : buf[i];
        want[i] -= 0.05 * dir;
      }
      check_close(vals(p), want);
    }
  }
}

TEST_CASE("optim: SGD corner cases (zero gradient with decay, no gradient, groups, zero_grad)", "[optim]") {
  // A zero gradient with weight decay still shrinks the parameter geometrically.
  Tensor p = param({2.0, -4.0});
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  set_grad(p, {0, 0});
  opt.step();  // buf = 0.1 p; p -= 0.5 * 0.1 p
  check_close(vals(p), {1.9, -3.8});

  // A parameter without a gradient is not touched and its momentum buffer is not created.
  Tensor a = param({1.0}), b = param({1.0});
  SGD two(NamedParameters{{"a", a}, {"b", b}}, {.lr = 1, .momentum = 0.9});
  set_grad(a, {1.0});
  two.step();
  check_close(vals(a), {0.0});
  check_close(vals(b), {1.0});
  const auto st = two.state_dict();
  CHECK(st.tensors.count("state.a.momentum_buffer") == 1);
  CHECK(st.tensors.count("state.b.momentum_buffer") == 0);

  // Per-group overrides of lr and weight decay.
  Tensor w = param({1.0}), bias = param({1.0});
  SGD grouped(std::vector<GroupSpec>{{{{"w", w}}, {}, {}}, {{{"bias", bias}}, 0.5, 0.0}}, {.lr = 0.1, .weight_decay = 1.0});
  CHECK(grouped.num_groups() == 2);
  CHECK(grouped.lr(1) == 0.5);
  set_grad(w, {1.0});
  set_grad(bias, {1.0});
  grouped.step();
  check_close(vals(w), {1.0 - 0.1 * (1.0 + 1.0)});
  check_close(vals(bias), {1.0 - 0.5});
  grouped.set_lr(0.2);
  CHECK(grouped.lr(0) == 0.2);
  CHECK(grouped.lr(1) == 0.2);

  // zero_grad: to none, or zeros in place.
  grouped.zero_grad(false);
  CHECK(vals(w.grad()) == Vec{0.0});
  grouped.zero_grad();
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(bias.grad().defined());
}

// ---------------------------------------------------------------- Adam / AdamW

namespace {
// The paper's Algorithm 1 with PyTorch's weight-decay variants, element by element.
Vec adam_reference(const Vec& start, const std::vector<Vec>& grads, double lr, double b1, double b2, double eps,
                   double wd, bool decoupled) {
  Vec p = start, m(p.size(), 0.0), v(p.size(), 0.0);
  for (std::size_t t = 1; t <= grads.size(); ++t) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grads[t - 1][i];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, double(t)));
      const double vhat = v[i] / (1 - std::pow(b2, double(t)));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  return p;
}
}  // namespace

TEST_CASE("optim: Adam's first three steps match the bias-corrected formulas", "[optim]") {
  for (double wd : {0.0, 0.1}) {
    CAPTURE(wd);
    Tensor p = param(kStart);
    Adam opt(std::vector<Tensor>{p}, {.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = wd});
    for (std::size_t t = 1; t <= kGrads.size(); ++t) {
      set_grad(p, kGrads[t - 1]);
      opt.step();
      const std::vector<Vec> so_far(kGrads.begin(), kGrads.begin() + static_cast<long>(t));
      check_close(vals(p), adam_reference(kStart, so_far, 0.01, 0.8, 0.95, 1e-6, wd, false));
    }
  }
  // The first step is lr * g / (|g| + eps) whatever the betas: literal numbers.
  Tensor p = param(kStart);
  Adam opt(std::vector<Tensor>{p}, {.lr = 0.1, .eps = 0});
  set_grad(p, kGrads[0]);
  opt.step();
  check_close(vals(p), {0.9, -1.9});
}

TEST_CASE("optim: AdamW decays decoupled from the moments", "[optim]") {
  Tensor p = param(kStart);
  AdamW opt(std::vector<Tensor>{p}, {.lr = 0.01, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 0.5});
  CHECK(opt.name() == "AdamW");
  for (std::size_t t = 1; t <= kGrads.size(); ++t) {
    set_grad(p, kGrads[t - 1]);
    opt.step();
    const std::vector<Vec> so_far(kGrads.begin(), kGrads.begin() + static_cast<long>(t));
    check_close(vals(p), adam_reference(kStart, so_far, 0.01, 0.9, 0.999, 1e-8, 0.5, true));
  }
  // Default weight decay is 1e-2 for AdamW, 0 for Adam.
  CHECK(AdamW(std::vector<Tensor>{param({1})}).lr() == 1e-3);
  CHECK(AdamW(std::vector<Tensor>{param({1})}).param_groups()[0].weight_decay == 1e-2);
  CHECK(Adam(std::vector<Tensor>{param({1})}).param_groups()[0].weight_decay == 0);
}

TEST_CASE("optim: Adam's step count is per parameter (skipped parameters do not advance)", "[optim]") {
  Tensor a = param({1.0}), b = param({1.0});
  Adam opt(NamedParameters{{"a", a}, {"b", b}}, {.lr = 0.1});
  set_grad(a, {1.0});
  opt.step();
  set_grad(b, {1.0});
  opt.step();  // a's second step, b's first
  const auto st = opt.state_dict();
  CHECK(st.scalars.at("state.a.step") == 2);
  CHECK(st.scalars.at("state.b.step") == 1);
  check_close(vals(b), adam_reference({1.0}, {{1.0}}, 0.1, 0.9, 0.999, 1e-8, 0, false));
  check_close(vals(a), adam_reference({1.0}, {{1.0}, {1.0}}, 0.1, 0.9, 0.999, 1e-8, 0, false));
}

// ---------------------------------------------------------------- convergence

namespace {
// Least squares: minimise mean((X w - y)^2) with y = X w_true exactly, X 20x3 standard normal
// (fixed seed), so the minimum is w_true.
struct LeastSquares {
  Tensor x, y;
  Vec w_true = {1.5, -2.0, 0.5};
  LeastSquares() {
    Generator gen(7);
    x = rand_normal({20, 3}, 0, 1, {.dtype = DType::Float64}, gen);
    const Vec xv = vals(x);
    Vec yv(20, 0.0);
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < 3; ++j) yv[i] += xv[3 * i + j] * w_true[j];
    y = from_vector(yv);
  }
  Tensor loss(const Tensor& w) const {
    Tensor r = sub(matmul(x, w), y);
    return mean(mul(r, r));
  }
};

template <class Opt>
Vec solve(Opt& opt, const Tensor& w, const LeastSquares& ls, int steps, const WarmupCosine* sched = nullptr) {
  for (int s = 0; s < steps; ++s) {
    if (sched) opt.set_lr(sched->lr(s));
    opt.zero_grad();
    backward(ls.loss(w));
    opt.step();
  }
  return vals(w);
}
}  // namespace

TEST_CASE("optim: every optimizer converges on a least-squares problem", "[optim]") {
  LeastSquares ls;
  auto check_solution = [&](const Vec& w, double tol) {
    for (int j = 0; j < 3; ++j) CHECK(w[j] == Approx(ls.w_true[j]).margin(tol));
  };
  {
    Tensor w = param({0, 0, 0});
    SGD opt(std::vector<Tensor>{w}, {.lr = 0.1, .momentum = 0.9});
    check_solution(solve(opt, w, ls, 600), 1e-6);
  }
  {
    Tensor w = param({0, 0, 0});
    SGD opt(std::vector<Tensor>{w}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
    check_solution(solve(opt, w, ls, 600), 1e-6);
  }
  {
    // Adam with its lr driven by the warm-up + cosine schedule, as a training loop would.
    Tensor w = param({0, 0, 0});
    Adam opt(std::vector<Tensor>{w}, {.lr = 0.05});
    WarmupCosine sched({.peak_lr = 0.05, .warmup_steps = 10, .total_steps = 1500});
    check_solution(solve(opt, w, ls, 1500, &sched), 1e-6);
  }
  {
    Tensor w = param({0, 0, 0});
    NTASGD opt(std::vector<Tensor>{w}, {.lr = 0.2, .nonmono = 2});
    opt.start_averaging();
    check_solution(solve(opt, w, ls, 2000), 1e-6);
    // The average of the iterates lags (it still counts the early ones) but heads to the same point.
    const Vec avg = vals(opt.averaged("param.0"));
    for (int j = 0; j < 3; ++j) CHECK(avg[j] == Approx(ls.w_true[j]).margin(1e-2));
  }
}

// ---------------------------------------------------------------- NT-ASGD

TEST_CASE("optim: NT-ASGD triggers when the metric is worse than the best before the last nonmono", "[optim]") {
  Tensor p = param({1.0});
  NTASGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .nonmono = 3});
  // Logs before each call and the best of all but the last 3 of them:
  //   10, 9, 8        (<= 3 logged: never)
  //   8.5             (3 logged: never)
  //   8.2 vs min(10)          = 10 -> no
  //   8.1 vs min(10, 9)       = 9  -> no
  //   7.95 vs min(10, 9, 8)  = 8  -> no (a new best)
  //   8.3 vs min(10, 9, 8, 8.5) = 8 -> trigger (the recent new best 7.95 is among the last three,
  //        which the rule leaves out: it compares with what was reached before them)
  const Vec metrics = {10, 9, 8, 8.5, 8.2, 8.1, 7.95, 8.3};
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CAPTURE(i);
    const bool fired = opt.observe(metrics[i]);
    CHECK(fired == (i + 1 == metrics.size()));
    CHECK(opt.averaging() == fired);
  }
  CHECK(opt.validation_log() == metrics);
  CHECK_FALSE(opt.observe(100));  // already averaging: only logged
  CHECK(opt.averaging());

  // A NaN evaluation does not trigger on its own.
  NTASGD other(std::vector<Tensor>{param({1.0})}, {.nonmono = 1});
  for (double m : {3.0, 2.0}) other.observe(m);
  CHECK_FALSE(other.observe(std::numeric_limits<double>::quiet_NaN()));
}

TEST_CASE("optim: NT-ASGD averages the iterates since the trigger and swaps them in for evaluation", "[optim]") {
  Tensor p = param({1.0, -1.0});
  NTASGD opt(NamedParameters{{"w", p}}, {.lr = 0.1, .weight_decay = 0.01, .nonmono = 1});
  const std::vector<Vec> grads = {{1, 2}, {-1, 0.5}, {0.3, -0.2}, {2, 1}, {-0.5, -0.5}, {0.1, 0.9}};
  Vec want = {1.0, -1.0};
  auto sgd_step = [&](const Vec& g) {
    set_grad(p, g);
    opt.step();
    for (int i = 0; i < 2; ++i) want[i] -= 0.1 * (g[i] + 0.01 * want[i]);
    check_close(vals(p), want);
  };
  sgd_step(grads[0]);
  sgd_step(grads[1]);
  CHECK_FALSE(opt.averaged("w").defined());
  REQUIRE_THROWS_WITH(opt.swap_in_averaged(), Contains("averaging has not started"));
  { AveragedWeights nothing(opt); }  // a no-op before the trigger
  opt.observe(5);
  opt.observe(4);
  CHECK_FALSE(opt.observe(4.5));  // 4.5 vs min(5): better than the best before the last one
  REQUIRE(opt.observe(4.6));      // 4.6 vs min(5, 4) = 4: worse
  CHECK(vals(opt.averaged("w")) == vals(p));  // before any averaged step: the trigger point

  Vec sum = {0, 0};
  for (std::size_t k = 2; k < grads.size(); ++k) {
    sgd_step(grads[k]);
    for (int i = 0; i < 2; ++i) sum[i] += want[i];
    const double n = static_cast<double>(k - 1);
    CHECK(opt.averaged_steps() == static_cast<std::int64_t>(n));
    check_close(vals(opt.averaged("w")), {sum[0] / n, sum[1] / n}, 1e-12);
  }

  const Vec live = vals(p), avg = vals(opt.averaged("w"));
  opt.swap_in_averaged();
  CHECK(vals(p) == avg);
  REQUIRE_THROWS_WITH(opt.step(), Contains("swapped in"));
  REQUIRE_THROWS_WITH(opt.state_dict(), Contains("swapped in"));
  REQUIRE_THROWS_WITH(opt.swap_in_averaged(), Contains("swapped in"));
  opt.swap_back();
  CHECK(vals(p) == live);
  REQUIRE_THROWS_WITH(opt.swap_back(), Contains("not swapped in"));
  {
    AveragedWeights guard(opt);
    CHECK(vals(p) == avg);
  }
  CHECK(vals(p) == live);
}

// ---------------------------------------------------------------- clipping

TEST_CASE("optim: clip_grad_norm returns the total norm and scales only above max_norm", "[optim]") {
  Tensor a = param({0, 0}), b = param({0}), c = param({0});
  const NamedParameters ps{{"a", a}, {"b", b}, {"c", c}};  // c has no gradient: skipped
  auto reset = [&] {
    set_grad(a, {3, -4});
    set_grad(b, {12});
  };
  reset();
  CHECK(clip_grad_norm(ps, 20) == Approx(13).epsilon(1e-15));
  CHECK(vals(a.grad()) == Vec{3, -4});  // below max_norm: untouched, bit for bit
  CHECK(vals(b.grad()) == Vec{12});

  const double coef = 6.5 / (13 + 1e-6);
  CHECK(clip_grad_norm(ps, 6.5) == Approx(13).epsilon(1e-15));
  check_close(vals(a.grad()), {3 * coef, -4 * coef});
  check_close(vals(b.grad()), {12 * coef});
  CHECK(grad_norm(ps) == Approx(6.5).epsilon(1e-6));

  reset();
  CHECK(clip_grad_norm(ps, 100, 1.0) == Approx(19).epsilon(1e-15));
  CHECK(clip_grad_norm(ps, 100, kInfNorm) == Approx(12).epsilon(1e-15));
  CHECK(clip_grad_norm(ps, 100, 3.0) == Approx(std::cbrt(27.0 + 64 + 1728)).epsilon(1e-13));
  CHECK(clip_grad_norm(ps, 6, kInfNorm) == Approx(12).epsilon(1e-15));
  check_close(vals(b.grad()), {12 * 6 / (12 + 1e-6)});

  // Plain tensors name their parameters by position in errors.
  reset();
  set_grad(b, {std::numeric_limits<double>::quiet_NaN()});
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1), Contains("norm is nan") && Contains("'b'"));
  REQUIRE_THROWS_WITH(clip_grad_norm(std::vector<Tensor>{a, b}, 1), Contains("'param.1'"));
  CHECK(vals(a.grad()) == Vec{3, -4});  // untouched by the failed call
  CHECK(std::isnan(clip_grad_norm(ps, 1, 2.0, NonFinite::Skip)));
  CHECK(vals(a.grad()) == Vec{3, -4});
  set_grad(b, {std::numeric_limits<double>::infinity()});
  CHECK(std::isinf(clip_grad_norm(ps, 1, kInfNorm, NonFinite::Skip)));
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1, kInfNorm), Contains("norm is inf") && Contains("'b'"));

  REQUIRE_THROWS_WITH(clip_grad_norm(ps, -1), Contains("clip_grad_norm: max_norm must be"));
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1, 0.0), Contains("clip_grad_norm: norm_type must be > 0"));
}

TEST_CASE("optim: clip_grad_value clamps elementwise", "[optim]") {
  Tensor a = param({0, 0, 0});
  set_grad(a, {-3, 0.5, 7});
  clip_grad_value(std::vector<Tensor>{a}, 1);
  CHECK(vals(a.grad()) == Vec{-1, 0.5, 1});
  REQUIRE_THROWS_WITH(clip_grad_value(std::vector<Tensor>{a}, -1), Contains("clip_grad_value: clip_value must be"));
}

// ---------------------------------------------------------------- schedules

TEST_CASE("optim: schedules give exact values at given steps", "[optim]") {
  StepDecay step(0.1, 3, 0.5);
  CHECK(step.lr(0) == 0.1);
  CHECK(step.lr(2) == 0.1);
  CHECK(step.lr(3) == 0.05);
  CHECK(step.lr(8) == 0.025);

  WarmupCosine cos({.peak_lr = 1.0, .warmup_steps = 4, .total_steps = 8, .min_lr = 0.2});
  CHECK(cos.lr(0) == 0.0);
  CHECK(cos.lr(1) == 0.25);
  CHECK(cos.lr(3) == 0.75);
  CHECK(cos.lr(4) == 1.0);
  CHECK(cos.lr(5) == Approx(0.2 + 0.8 * 0.5 * (1 + std::cos(std::numbers::pi / 4))).epsilon(1e-15));
  CHECK(cos.lr(6) == Approx(0.6).epsilon(1e-15));
  CHECK(cos.lr(8) == 0.2);
  CHECK(cos.lr(100) == 0.2);

  InverseSqrt inv({.peak_lr = 1e-3, .warmup_steps = 4, .warmup_init_lr = 1e-7});
  CHECK(inv.lr(0) == 1e-7);
  CHECK(inv.lr(2) == Approx(1e-7 + (1e-3 - 1e-7) * 0.5).epsilon(1e-15));
  CHECK(inv.lr(4) == Approx(1e-3).epsilon(1e-15));
  CHECK(inv.lr(16) == Approx(0.5e-3).epsilon(1e-15));  // 1e-3 * sqrt(4) / sqrt(16)
  CHECK(inv.lr(100) == Approx(1e-3 * 2 / 10).epsilon(1e-15));
  InverseSqrt no_warmup({.peak_lr = 1.0, .warmup_steps = 0});
  CHECK(no_warmup.lr(0) == 1.0);
  CHECK(no_warmup.lr(4) == 0.5);

  REQUIRE_THROWS_WITH(step.lr(-1), Contains("StepDecay: step must be >= 0"));
}

TEST_CASE("optim: reduce-on-plateau follows patience, threshold, cooldown and min_lr", "[optim]") {
  PlateauOptions o{.factor = 0.5, .patience = 2, .threshold = 0.1, .cooldown = 1, .min_lr = 0.3};
  ReduceOnPlateau plateau(1.0, o);
  // best after each, bad count, lr:
  //  10  : best 10, 0, 1.0
  //  9.5 : not < 10 * 0.9 = 9 -> bad 1
  //  9.2 : bad 2
  //  9.1 : bad 3 > 2 -> lr 0.5, cooldown 1, bad 0
  //  9.0 : cooldown: bad held at 0 (9.0 not < 9)
  //  8.0 : better (< 9): best 8, bad 0
  //  8.0, 8.0, 8.0 : bad 1, 2, 3 -> lr max(0.25, 0.3) = 0.3
  //  7.9 x 4 : bad ..., but lr is at min_lr: stays 0.3
  const Vec metrics = {10, 9.5, 9.2, 9.1, 9.0, 8.0, 8.0, 8.0, 8.0, 7.9, 7.9, 7.9, 7.9};
  const Vec lrs = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3, 0.3, 0.3};
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CAPTURE(i);
    CHECK(plateau.step(metrics[i]) == lrs[i]);
  }
  CHECK(plateau.best() == 8.0);
  CHECK(ReduceOnPlateau::lr_after(1.0, o, metrics) == 0.3);

  // Absolute threshold, max mode.
  ReduceOnPlateau up(1.0, {.mode = PlateauOptions::Mode::Max, .factor = 0.1, .patience = 0, .threshold = 0.5,
                           .threshold_mode = PlateauOptions::ThresholdMode::Abs});
  CHECK(up.step(1.0) == 1.0);
  CHECK(up.step(1.4) == Approx(0.1));  // not > 1.0 + 0.5

  // state_dict round trip: the resumed scheduler continues identically.
  ReduceOnPlateau a(1.0, o), b(1.0, o);
  for (std::size_t i = 0; i < 7; ++i) a.step(metrics[i]);
  b.load_state_dict(a.state_dict());
  for (std::size_t i = 7; i < metrics.size(); ++i) CHECK(a.step(metrics[i]) == b.step(metrics[i]));
  CHECK(a.state_dict() == b.state_dict());

  auto sd = a.state_dict();
  sd.erase("best");
  REQUIRE_THROWS_WITH(b.load_state_dict(sd), Contains("missing key 'best'"));
  sd = a.state_dict();
  sd["bogus"] = 1;
  REQUIRE_THROWS_WITH(b.load_state_dict(sd), Contains("unexpected key 'bogus'"));
  sd = a.state_dict();
  sd["num_bad_evals"] = -1;
  REQUIRE_THROWS_WITH(b.load_state_dict(sd), Contains("'num_bad_evals' must be a count"));
}

// ---------------------------------------------------------------- state_dict

namespace {
// Runs `first` steps on one optimizer, snapshots parameters and state, runs `then` more; a second
// optimizer over the snapshot with the loaded state must reproduce those steps exactly.
template <class Opt, class Options>
void check_resume(Options options, int first, int then) {
  const std::vector<Vec> grads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}, {1.5, -0.3}, {0.2, 0.2}, {-1, 1}};
  Tensor p = param(kStart), q = param({0.5});
  Opt a(NamedParameters{{"enc.w", p}, {"dec.b", q}}, options);
  auto step = [&](Opt& opt, const Tensor& pp, const Tensor& qq, int t) {
    set_grad(pp, grads[t]);
    if (t % 2 == 0) set_grad(qq, {grads[t][0]});  // q gets a gradient every other step
    else qq.set_grad(Tensor());
    opt.step();
  };
  for (int t = 0; t < first; ++t) step(a, p, q, t);
  const OptimizerState saved = a.state_dict();
  Tensor p2 = param(vals(p)), q2 = param(vals(q));
  for (int t = first; t < first + then; ++t) step(a, p, q, t);

  Opt b(NamedParameters{{"enc.w", p2}, {"dec.b", q2}}, options);
  b.load_state_dict(saved);
  for (int t = first; t < first + then; ++t) step(b, p2, q2, t);
  CHECK(vals(p2) == vals(p));  // bit for bit
  CHECK(vals(q2) == vals(q));
}
}  // namespace

TEST_CASE("optim: state_dict round trip gives identical subsequent steps", "[optim]") {
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 3, 3);
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}, 2, 4);
  check_resume<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 3, 3);
  check_resume<AdamW>(AdamWOptions{.lr = 0.01}, 1, 5);
  check_resume<Adam>(AdamOptions{}, 0, 2);  // an empty state loads too

  // NT-ASGD: the trigger, the averages and the validation log come back.
  Tensor p = param(kStart);
  NTASGD a(NamedParameters{{"w", p}}, {.lr = 0.1, .nonmono = 1});
  for (double m : {3.0, 2.0, 2.5, 2.6}) a.observe(m);
  REQUIRE(a.averaging());
  set_grad(p, {1, 1});
  a.step();
  a.step();
  const auto saved = a.state_dict();
  CHECK(saved.scalars.at("optimizer.avg_steps") == 2);
  Tensor p2 = param(vals(p));
  NTASGD b(NamedParameters{{"w", p2}}, {.lr = 0.1, .nonmono = 1});
  b.load_state_dict(saved);
  CHECK(b.averaging());
  CHECK(b.validation_log() == Vec{3.0, 2.0, 2.5, 2.6});
  set_grad(p2, {1, 1});
  for (NTASGD* o : {&a, &b}) o->step();
  CHECK(vals(p2) == vals(p));
  CHECK(vals(b.averaged("w")) == vals(a.averaged("w")));

  // The schedule's lr set on the optimizer is part of the state.
  Tensor r = param({1.0});
  Adam c(std::vector<Tensor>{r}, {.lr = 0.1});
  c.set_lr(0.0125);
  Adam d(std::vector<Tensor>{param({1.0})}, {.lr = 0.1});
  d.load_state_dict(c.state_dict());
  CHECK(d.lr() == 0.0125);
}

TEST_CASE("optim: state_dict is a snapshot and load_state_dict errors name the key", "[optim]") {
  Tensor p = param(kStart);
  Adam opt(NamedParameters{{"layer.weight", p}}, {.lr = 0.1});
  set_grad(p, {1, 1});
  opt.step();
  const OptimizerState saved = opt.state_dict();
  const Vec m1 = vals(saved.tensors.at("state.layer.weight.exp_avg"));
  opt.step();
  CHECK(vals(saved.tensors.at("state.layer.weight.exp_avg")) == m1);

  auto broken = saved;
  broken.tensors.erase("state.layer.weight.exp_avg_sq");
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("Adam.load_state_dict: missing key 'state.layer.weight.exp_avg_sq'"));
  broken = saved;
  broken.tensors["state.layer.bias.exp_avg"] = from_vector(Vec{1, 2});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'state.layer.bias.exp_avg' names no parameter"));
  broken = saved;
  broken.tensors["state.layer.weight.momentum_buffer"] = from_vector(Vec{1, 2});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("unexpected key 'state.layer.weight.momentum_buffer'"));
  broken = saved;
  broken.tensors["state.layer.weight.exp_avg"] = from_vector(Vec{1, 2, 3});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'state.layer.weight.exp_avg' has shape [3]"));
  broken = saved;
  broken.scalars.erase("group.0.lr");
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("missing key 'group.0.lr'"));
  broken = saved;
  broken.scalars["group.0.lr"] = -1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("lr must be >= 0"));
  broken = saved;
  broken.scalars["group.3.lr"] = 1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'group.3.lr'"));
  broken = saved;
  broken.scalars["optimizer.averaging"] = 1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("unexpected key 'optimizer.averaging'"));

  // A failed load changed nothing: the next step is the same as without the attempts.
  Tensor p2 = param(vals(p));
  Adam twin(NamedParameters{{"layer.weight", p2}}, {.lr = 0.1});
  twin.load_state_dict(opt.state_dict());
  set_grad(p2, {1, 1});
  opt.step();
  twin.step();
  CHECK(vals(p) == vals(p2));

  // NT-ASGD before the trigger must not carry averages.
  Tensor w = param({1.0});
  NTASGD nt(NamedParameters{{"w", w}});
  auto sd = nt.state_dict();
  sd.tensors["state.w.ax"] = from_vector(Vec{1.0});
  REQUIRE_THROWS_WITH(nt.load_state_dict(sd), Contains("unexpected key 'state.w.ax'"));
  sd = nt.state_dict();
  sd.scalars.erase("optimizer.log_size");
  REQUIRE_THROWS_WITH(nt.load_state_dict(sd), Contains("missing key 'optimizer.log_size'"));
}

// ---------------------------------------------------------------- errors

TEST_CASE("optim: bad hyper-parameters are refused with the parameter's name", "[optim]") {
  const std::vector<Tensor> ps{param({1.0})};
  REQUIRE_THROWS_WITH(Adam(ps, {.lr = -0.1}), Contains("Adam: lr must be >= 0 (got -0.1)"));
  REQUIRE_THROWS_WITH(Adam(ps, {.betas = {1.0, 0.999}}), Contains("Adam: betas[0] must be in [0, 1) (got 1)"));
  REQUIRE_THROWS_WITH(Adam(ps, {.betas = {0.9, -0.5}}), Contains("Adam: betas[1] must be in [0, 1) (got -0.5)"));
  REQUIRE_THROWS_WITH(AdamW(ps, {.eps = -1}), Contains("AdamW: eps must be >= 0"));
  REQUIRE_THROWS_WITH(AdamW(ps, {.weight_decay = -1}), Contains("AdamW: weight_decay must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.lr = -1}), Contains("SGD: lr must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.momentum = -0.9}), Contains("SGD: momentum must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.dampening = 2}), Contains("SGD: dampening must be in [0, 1]"));
  REQUIRE_THROWS_WITH(SGD(ps, {.nesterov = true}), Contains("SGD: nesterov needs momentum > 0"));
  REQUIRE_THROWS_WITH(NTASGD(ps, {.nonmono = 0}), Contains("NTASGD: nonmono must be >= 1"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{}), Contains("SGD: got an empty parameter list"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{ps[0], ps[0]}), Contains("is the same tensor as 'param.0'"));
  REQUIRE_THROWS_WITH(SGD(NamedParameters{{"w", ps[0]}, {"w", param({2.0})}}), Contains("name 'w' appears twice"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{from_vector(std::vector<std::int64_t>{1})}), Contains("dtype int64"));
  REQUIRE_THROWS_WITH(SGD(std::vector<GroupSpec>{{{{"a", ps[0]}}, {}, {}}, {{{"b", param({1.0})}}, -2.0, {}}}),
                      Contains("SGD: param group 1 lr must be >= 0 (got -2)"));
  SGD opt(ps);
  REQUIRE_THROWS_WITH(opt.set_lr(-1), Contains("SGD: lr must be >= 0"));
  REQUIRE_THROWS_WITH(opt.lr(3), Contains("no param group 3"));

  REQUIRE_THROWS_WITH(StepDecay(0.1, 0), Contains("StepDecay: step_size must be > 0"));
  REQUIRE_THROWS_WITH(WarmupCosine({.peak_lr = 1, .warmup_steps = 10, .total_steps = 10}),
                      Contains("WarmupCosine: total_steps must be > warmup_steps"));
  REQUIRE_THROWS_WITH(WarmupCosine({.peak_lr = 1, .total_steps = 10, .min_lr = 2}), Contains("WarmupCosine: min_lr"));
  REQUIRE_THROWS_WITH(InverseSqrt({.peak_lr = -1}), Contains("InverseSqrt: peak_lr must be >= 0"));
  REQUIRE_THROWS_WITH(ReduceOnPlateau(1.0, {.factor = 1.0}), Contains("ReduceOnPlateau: factor must be in (0, 1)"));
  REQUIRE_THROWS_WITH(ReduceOnPlateau(1.0, {.patience = -1}), Contains("ReduceOnPlateau: patience must be >= 0"));
}

// ---------------------------------------------------------------- emulated device

TEST_CASE("optim: Adam, SGD and clipping on the emulated CUDA device match the CPU", "[optim]") {
  REQUIRE(kernels::register_devices().emu);
  const std::vector<float> start = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.0f};
  const std::vector<std::vector<float>> grads = {
      {0.5f, -1.0f, 2.0f, 0.1f, -0.3f, 1.0f}, {0.25f, 2.0f, -1.0f, 0.0f, 0.7f, -0.2f}, {-0.75f, 0.1f, 0.4f, -2.0f, 0.2f, 0.3f}};
  auto run = [&](Device dev, bool adam) {
    Tensor p = from_vector(start, {2, 3}, dev).set_requires_grad();
    std::unique_ptr<Optimizer> opt;
    if (adam) opt = std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 0.1});
    else opt = std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    std::vector<double> norms;
    for (const auto& g : grads) {
      p.set_grad(from_vector(g, {2, 3}, dev));
      norms.push_back(clip_grad_norm(std::vector<Tensor>{p}, 2.0));
      opt->step();
    }
    CHECK(p.device() == dev);
    const auto st = opt->state_dict();
    CHECK(st.tensors.size() == (adam ? 2u : 1u));
    for (const auto& kv : st.tensors) CHECK(kv.second.device() == dev);  // state lives beside p
    return std::make_pair(p.to_vector<float>(), norms);
  };
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    const auto [cpu, cpu_norms] = run(Device::cpu(), adam);
    const auto [emu, emu_norms] = run(Device::emu(), adam);
    for (std::size_t i = 0; i < cpu.size(); ++i) CHECK(emu[i] == Approx(cpu[i]).epsilon(1e-6).margin(1e-7));
    for (std::size_t i = 0; i < cpu_norms.size(); ++i) CHECK(emu_norms[i] == Approx(cpu_norms[i]).epsilon(1e-6));
  }

  // A state saved on the CPU loads onto emulated-device parameters and continues identically.
  Tensor pc = from_vector(start, {2, 3}).set_requires_grad();
  Adam cpu_opt(NamedParameters{{"w", pc}}, {.lr = 0.01});
  pc.set_grad(from_vector(grads[0], {2, 3}));
  cpu_opt.step();
  Tensor pe = copy_to_device(pc, Device::emu()).set_requires_grad();
  Adam emu_opt(NamedParameters{{"w", pe}}, {.lr = 0.01});
  emu_opt.load_state_dict(cpu_opt.state_dict());
  CHECK(emu_opt.state_dict().tensors.at("state.w.exp_avg").device() == Device::emu());
  pc.set_grad(from_vector(grads[1], {2, 3}));
  pe.set_grad(from_vector(grads[1], {2, 3}, Device::emu()));
  cpu_opt.step();
  emu_opt.step();
  const auto a = pc.to_vector<float>(), b = pe.to_vector<float>();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-6).margin(1e-7));
}
