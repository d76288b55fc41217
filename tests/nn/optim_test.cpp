// Optimizers (nn/optim/): SGD (plain, weight decay, momentum, dampening, nesterov, corner cases)
// and Adam / AdamW trajectories checked step by step against the update formulas written out
// again here in plain double arithmetic (float64 parameters, so agreement is to rounding), then
// convergence of every optimizer on a least-squares problem. NT-ASGD, clipping and schedules are
// in optim_schedule_test.cpp; state_dict, hyper-parameter errors and the emulated device in
// optim_state_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "support/optim.h"

using namespace define;
using namespace define::optim;
using namespace define::test::optim_test;

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
      check_close(values(p), want, 1e-15, 1e-12);
    }
  }
  // Literal numbers for the first step without decay: 1 - 0.1 * 0.5, -2 + 0.1 * 1.
  Tensor p = param(kStart);
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  set_grad(p, kGrads[0]);
  opt.step();
  check_close(values(p), {0.95, -1.9}, 1e-15, 1e-12);
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
      check_close(values(p), want, 1e-15, 1e-12);
    }
  }
}

TEST_CASE("optim: SGD corner cases (zero gradient with decay, no gradient, groups, zero_grad)", "[optim]") {
  // A zero gradient with weight decay still shrinks the parameter geometrically.
  Tensor p = param({2.0, -4.0});
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  set_grad(p, {0, 0});
  opt.step();  // buf = 0.1 p; p -= 0.5 * 0.1 p
  check_close(values(p), {1.9, -3.8}, 1e-15, 1e-12);

  // A parameter without a gradient is not touched and its momentum buffer is not created.
  Tensor a = param({1.0}), b = param({1.0});
  SGD two(NamedParameters{{"a", a}, {"b", b}}, {.lr = 1, .momentum = 0.9});
  set_grad(a, {1.0});
  two.step();
  check_close(values(a), {0.0}, 1e-15, 1e-12);
  check_close(values(b), {1.0}, 1e-15, 1e-12);
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
  check_close(values(w), {1.0 - 0.1 * (1.0 + 1.0)}, 1e-15, 1e-12);
  check_close(values(bias), {1.0 - 0.5}, 1e-15, 1e-12);
  grouped.set_lr(0.2);
  CHECK(grouped.lr(0) == 0.2);
  CHECK(grouped.lr(1) == 0.2);

  // zero_grad: to none, or zeros in place.
  grouped.zero_grad(false);
  CHECK(values(w.grad()) == Vec{0.0});
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
      check_close(values(p), adam_reference(kStart, so_far, 0.01, 0.8, 0.95, 1e-6, wd, false), 1e-15, 1e-12);
    }
  }
  // The first step is lr * g / (|g| + eps) whatever the betas: literal numbers.
  Tensor p = param(kStart);
  Adam opt(std::vector<Tensor>{p}, {.lr = 0.1, .eps = 0});
  set_grad(p, kGrads[0]);
  opt.step();
  check_close(values(p), {0.9, -1.9}, 1e-15, 1e-12);
}

TEST_CASE("optim: AdamW decays decoupled from the moments", "[optim]") {
  Tensor p = param(kStart);
  AdamW opt(std::vector<Tensor>{p}, {.lr = 0.01, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 0.5});
  CHECK(opt.name() == "AdamW");
  for (std::size_t t = 1; t <= kGrads.size(); ++t) {
    set_grad(p, kGrads[t - 1]);
    opt.step();
    const std::vector<Vec> so_far(kGrads.begin(), kGrads.begin() + static_cast<long>(t));
    check_close(values(p), adam_reference(kStart, so_far, 0.01, 0.9, 0.999, 1e-8, 0.5, true), 1e-15, 1e-12);
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
  check_close(values(b), adam_reference({1.0}, {{1.0}}, 0.1, 0.9, 0.999, 1e-8, 0, false), 1e-15, 1e-12);
  check_close(values(a), adam_reference({1.0}, {{1.0}, {1.0}}, 0.1, 0.9, 0.999, 1e-8, 0, false), 1e-15, 1e-12);
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
    const Vec xv = values(x);
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
  return values(w);
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
    const Vec avg = values(opt.averaged("param.0"));
    for (int j = 0; j < 3; ++j) CHECK(avg[j] == Approx(ls.w_true[j]).margin(1e-2));
  }
}
