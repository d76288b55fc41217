// NT-ASGD's trigger and averaging, gradient clipping (by norm, by value) and the learning-rate
// schedules (exact values, reduce-on-plateau) of nn/optim/, against values written out here in
// plain double arithmetic. The optimizers' own update formulas are in optim_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "core/factory.h"
#include "kernels/devices.h"
#include "support/optim.h"

using namespace define;
using namespace define::optim;
using namespace define::test::optim_test;
using Catch::Contains;

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
    check_close(values(p), want, 1e-15, 1e-12);
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
  CHECK(values(opt.averaged("w")) == values(p));  // before any averaged step: the trigger point

  Vec sum = {0, 0};
  for (std::size_t k = 2; k < grads.size(); ++k) {
    sgd_step(grads[k]);
    for (int i = 0; i < 2; ++i) sum[i] += want[i];
    const double n = static_cast<double>(k - 1);
    CHECK(opt.averaged_steps() == static_cast<std::int64_t>(n));
    check_close(values(opt.averaged("w")), {sum[0] / n, sum[1] / n}, 1e-15, 1e-12);
  }

  const Vec live = values(p), avg = values(opt.averaged("w"));
  opt.swap_in_averaged();
  CHECK(values(p) == avg);
  REQUIRE_THROWS_WITH(opt.step(), Contains("swapped in"));
  REQUIRE_THROWS_WITH(opt.state_dict(), Contains("swapped in"));
  REQUIRE_THROWS_WITH(opt.swap_in_averaged(), Contains("swapped in"));
  opt.swap_back();
  CHECK(values(p) == live);
  REQUIRE_THROWS_WITH(opt.swap_back(), Contains("not swapped in"));
  {
    AveragedWeights guard(opt);
    CHECK(values(p) == avg);
  }
  CHECK(values(p) == live);
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
  CHECK(values(a.grad()) == Vec{3, -4});  // below max_norm: untouched, bit for bit
  CHECK(values(b.grad()) == Vec{12});

  const double coef = 6.5 / (13 + 1e-6);
  CHECK(clip_grad_norm(ps, 6.5) == Approx(13).epsilon(1e-15));
  check_close(values(a.grad()), {3 * coef, -4 * coef}, 1e-15, 1e-12);
  check_close(values(b.grad()), {12 * coef}, 1e-15, 1e-12);
  CHECK(grad_norm(ps) == Approx(6.5).epsilon(1e-6));

  reset();
  CHECK(clip_grad_norm(ps, 100, 1.0) == Approx(19).epsilon(1e-15));
  CHECK(clip_grad_norm(ps, 100, kInfNorm) == Approx(12).epsilon(1e-15));
  CHECK(clip_grad_norm(ps, 100, 3.0) == Approx(std::cbrt(27.0 + 64 + 1728)).epsilon(1e-13));
  CHECK(clip_grad_norm(ps, 6, kInfNorm) == Approx(12).epsilon(1e-15));
  check_close(values(b.grad()), {12 * 6 / (12 + 1e-6)}, 1e-15, 1e-12);

  // Plain tensors name their parameters by position in errors.
  reset();
  set_grad(b, {std::numeric_limits<double>::quiet_NaN()});
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1), Contains("norm is nan") && Contains("'b'"));
  REQUIRE_THROWS_WITH(clip_grad_norm(std::vector<Tensor>{a, b}, 1), Contains("'param.1'"));
  CHECK(values(a.grad()) == Vec{3, -4});  // untouched by the failed call
  CHECK(std::isnan(clip_grad_norm(ps, 1, 2.0, NonFinite::Skip)));
  CHECK(values(a.grad()) == Vec{3, -4});
  set_grad(b, {std::numeric_limits<double>::infinity()});
  CHECK(std::isinf(clip_grad_norm(ps, 1, kInfNorm, NonFinite::Skip)));
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1, kInfNorm), Contains("norm is inf") && Contains("'b'"));

  REQUIRE_THROWS_WITH(clip_grad_norm(ps, -1), Contains("clip_grad_norm: max_norm must be"));
  REQUIRE_THROWS_WITH(clip_grad_norm(ps, 1, 0.0), Contains("clip_grad_norm: norm_type must be > 0"));
}

// The training loop's clipping (no host read): the same norm and the same scaled gradients as
// clip_grad_norm for every norm type, on the CPU and the emulated device; a non-finite total leaves
// the gradients untouched and comes back as the norm.
TEST_CASE("optim: clip_grad_norm_on_device equals clip_grad_norm", "[optim]") {
  for (const Device device : {Device::cpu(), Device::emu()}) {
    if (device.is_emu() && !kernels::register_devices().emu) continue;
    CAPTURE(device.str());
    const auto on_device = [&](const Vec& v) { return copy_to_device(from_vector(v), device); };
    for (const double norm_type : {1.0, 2.0, 3.0, kInfNorm}) {
      for (const double max_norm : {5.0, 100.0}) {  // clips, does not clip
        CAPTURE(norm_type, max_norm);
        Tensor a = param({0, 0}), b = param({0});
        set_grad(a, {3, -4});
        set_grad(b, {12});
        const NamedParameters host{{"a", a}, {"b", b}};
        const double expected = clip_grad_norm(host, max_norm, norm_type);
        Tensor da = on_device({0, 0}).set_requires_grad();
        Tensor db = on_device({0}).set_requires_grad();
        da.set_grad(on_device({3, -4}));
        db.set_grad(on_device({12}));
        const Tensor norm = clip_grad_norm_on_device({{"a", da}, {"b", db}}, max_norm, norm_type);
        CHECK(norm.device() == device);
        CHECK(values(copy_to_device(norm, Device::cpu()))[0] == Approx(expected).epsilon(1e-14));
        check_close(values(copy_to_device(da.grad(), Device::cpu())), values(a.grad()), 1e-14, 1e-12);
        check_close(values(copy_to_device(db.grad(), Device::cpu())), values(b.grad()), 1e-14, 1e-12);
      }
    }
    Tensor a = on_device({0, 0}).set_requires_grad();
    a.set_grad(on_device({3, std::numeric_limits<double>::quiet_NaN()}));
    const Tensor norm = clip_grad_norm_on_device({{"a", a}}, 1.0);
    CHECK(std::isnan(values(copy_to_device(norm, Device::cpu()))[0]));
    const Vec g = values(copy_to_device(a.grad(), Device::cpu()));
    CHECK(g[0] == 3);  // untouched
    CHECK(std::isnan(g[1]));
  }
}

TEST_CASE("optim: clip_grad_value clamps elementwise", "[optim]") {
  Tensor a = param({0, 0, 0});
  set_grad(a, {-3, 0.5, 7});
  clip_grad_value(std::vector<Tensor>{a}, 1);
  CHECK(values(a.grad()) == Vec{-1, 0.5, 1});
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

TEST_CASE("optim: a schedule over a time budget projects the steps at the budget's end", "[optim]") {
  CHECK(projected_total_steps(100, 10.0, 60.0, 1) == 600);    // 10 steps/s for 60 s
  CHECK(projected_total_steps(7, 3.0, 10.0, 1) == 24);        // 23.3: rounded up, never short of the end
  CHECK(projected_total_steps(50, 60.0, 60.0, 1) == 50);      // at the end: the steps made
  CHECK(projected_total_steps(50, 90.0, 60.0, 51) == 51);     // past it: at least the floor
  CHECK(projected_total_steps(0, 0.0, 60.0, 201) == 201);     // no rate yet
  CHECK(projected_total_steps(3, 1e-300, 60.0, 1) == 1000000000000000);  // capped, not overflowed
  CHECK_THROWS_WITH(projected_total_steps(1, 1.0, 0.0, 1), Contains("budget_s must be finite and > 0"));
  CHECK_THROWS_WITH(projected_total_steps(-1, 1.0, 1.0, 1), Contains("step must be >= 0"));
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
