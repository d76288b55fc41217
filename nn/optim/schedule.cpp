#include "nn/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/error.h"

namespace define::optim {

namespace {

void check(bool ok, const char* sched, const char* what, double value, const char* requirement) {
  if (!ok) fail(sched, "{} must be {} (got {})", what, requirement, value);
}

void check_step(const char* sched, std::int64_t step) {
  if (step < 0) fail(sched, "step must be >= 0 (got {})", step);
}

bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace

StepDecay::StepDecay(double base_lr, std::int64_t step_size, double gamma)
    : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {
  check(finite_nonneg(base_lr), "StepDecay", "base_lr", base_lr, ">= 0");
  check(step_size > 0, "StepDecay", "step_size", static_cast<double>(step_size), "> 0");
  check(finite_nonneg(gamma), "StepDecay", "gamma", gamma, ">= 0");
}

double StepDecay::lr(std::int64_t epoch) const {
  check_step("StepDecay", epoch);
  return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

WarmupCosine::WarmupCosine(WarmupCosineOptions o) : opt_(o) {
  check(finite_nonneg(o.peak_lr), "WarmupCosine", "peak_lr", o.peak_lr, ">= 0");
  check(finite_nonneg(o.min_lr) && o.min_lr <= o.peak_lr, "WarmupCosine", "min_lr", o.min_lr, "in [0, peak_lr]");
  check(finite_nonneg(o.warmup_init_lr), "WarmupCosine", "warmup_init_lr", o.warmup_init_lr, ">= 0");
  check(o.warmup_steps >= 0, "WarmupCosine", "warmup_steps", static_cast<double>(o.warmup_steps), ">= 0");
  check(o.total_steps > o.warmup_steps, "WarmupCosine", "total_steps", static_cast<double>(o.total_steps),
        "> warmup_steps");
}

double WarmupCosine::lr(std::int64_t s) const {
  check_step("WarmupCosine", s);
  const auto& o = opt_;
  if (s < o.warmup_steps)
    return o.warmup_init_lr + (o.peak_lr - o.warmup_init_lr) * static_cast<double>(s) / static_cast<double>(o.warmup_steps);
  if (s >= o.total_steps) return o.min_lr;
  const double progress = static_cast<double>(s - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
  return o.min_lr + (o.peak_lr - o.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

std::int64_t projected_total_steps(std::int64_t steps, double elapsed_s, double budget_s, std::int64_t at_least) {
  check_step("projected_total_steps", steps);
  check(std::isfinite(budget_s) && budget_s > 0, "projected_total_steps", "budget_s", budget_s, "finite and > 0");
  if (steps == 0 || !(elapsed_s > 0)) return at_least;  // no rate to project yet
  // Capped well inside int64 for a rate measured over a vanishing time.
  const double projected = std::min(std::ceil(static_cast<double>(steps) * budget_s / elapsed_s), 1e15);
  return std::max(at_least, static_cast<std::int64_t>(projected));
}

InverseSqrt::InverseSqrt(InverseSqrtOptions o) : opt_(o) {
  check(finite_nonneg(o.peak_lr), "InverseSqrt", "peak_lr", o.peak_lr, ">= 0");
  check(finite_nonneg(o.warmup_init_lr), "InverseSqrt", "warmup_init_lr", o.warmup_init_lr, ">= 0");
  check(o.warmup_steps >= 0, "InverseSqrt", "warmup_steps", static_cast<double>(o.warmup_steps), ">= 0");
}

double InverseSqrt::lr(std::int64_t s) const {
  check_step("InverseSqrt", s);
  const auto& o = opt_;
  if (s < o.warmup_steps)
    return o.warmup_init_lr + (o.peak_lr - o.warmup_init_lr) * static_cast<double>(s) / static_cast<double>(o.warmup_steps);
  if (o.warmup_steps == 0) return o.peak_lr / std::sqrt(static_cast<double>(std::max<std::int64_t>(s, 1)));
  return o.peak_lr * std::sqrt(static_cast<double>(o.warmup_steps)) / std::sqrt(static_cast<double>(s));
}

ReduceOnPlateau::ReduceOnPlateau(double initial_lr, PlateauOptions o) : opt_(o), lr_(initial_lr) {
  check(finite_nonneg(initial_lr), "ReduceOnPlateau", "initial_lr", initial_lr, ">= 0");
  check(o.factor > 0 && o.factor < 1, "ReduceOnPlateau", "factor", o.factor, "in (0, 1)");
  check(o.patience >= 0, "ReduceOnPlateau", "patience", static_cast<double>(o.patience), ">= 0");
  check(finite_nonneg(o.threshold), "ReduceOnPlateau", "threshold", o.threshold, ">= 0");
  check(o.cooldown >= 0, "ReduceOnPlateau", "cooldown", static_cast<double>(o.cooldown), ">= 0");
  check(finite_nonneg(o.min_lr), "ReduceOnPlateau", "min_lr", o.min_lr, ">= 0");
  check(finite_nonneg(o.eps), "ReduceOnPlateau", "eps", o.eps, ">= 0");
  best_ = o.mode == PlateauOptions::Mode::Min ? std::numeric_limits<double>::infinity()
                                               : -std::numeric_limits<double>::infinity();
}

bool ReduceOnPlateau::is_better(double a) const {
  using M = PlateauOptions::Mode;
  using T = PlateauOptions::ThresholdMode;
  const double th = opt_.threshold;
  if (opt_.mode == M::Min) return opt_.threshold_mode == T::Rel ? a < best_ * (1 - th) : a < best_ - th;
  return opt_.threshold_mode == T::Rel ? a > best_ * (1 + th) : a > best_ + th;
}

double ReduceOnPlateau::step(double metric) {
  ++evals_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_ = 0;
  } else {
    ++num_bad_;  // NaN is never better: a diverged evaluation counts as bad
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_ = 0;
  }
  if (num_bad_ > opt_.patience) {
    const double reduced = std::max(lr_ * opt_.factor, opt_.min_lr);
    if (lr_ - reduced > opt_.eps) lr_ = reduced;
    cooldown_counter_ = opt_.cooldown;
    num_bad_ = 0;
  }
  return lr_;
}

double ReduceOnPlateau::lr_after(double initial_lr, const PlateauOptions& opt, const std::vector<double>& history) {
  ReduceOnPlateau p(initial_lr, opt);
  for (double m : history) p.step(m);
  return p.lr();
}

std::map<std::string, double> ReduceOnPlateau::state_dict() const {
  return {{"lr", lr_},
          {"best", best_},
          {"num_bad_evals", static_cast<double>(num_bad_)},
          {"cooldown_counter", static_cast<double>(cooldown_counter_)},
          {"evals", static_cast<double>(evals_)}};
}

void ReduceOnPlateau::load_state_dict(const std::map<std::string, double>& s) {
  const char* op = "ReduceOnPlateau.load_state_dict";
  for (const auto& entry : s) {
    const std::string& k = entry.first;
    if (k != "lr" && k != "best" && k != "num_bad_evals" && k != "cooldown_counter" && k != "evals")
      fail(op, "unexpected key '{}'", k);
  }
  auto get = [&](const char* k) {
    auto it = s.find(k);
    if (it == s.end()) fail(op, "missing key '{}'", k);
    return it->second;
  };
  auto count = [&](const char* k) {
    const double v = get(k);
    if (!(v >= 0) || v != std::floor(v) || v > 9007199254740992.0) fail(op, "key '{}' must be a count (got {})", k, v);
    return static_cast<std::int64_t>(v);
  };
  const double lr = get("lr");
  if (!finite_nonneg(lr)) fail(op, "key 'lr' must be >= 0 (got {})", lr);
  const double best = get("best");
  if (std::isnan(best)) fail(op, "key 'best' is NaN");
  const auto bad = count("num_bad_evals"), cool = count("cooldown_counter"), evals = count("evals");
  lr_ = lr;
  best_ = best;
  num_bad_ = bad;
  cooldown_counter_ = cool;
  evals_ = evals;
}

}  // namespace define::optim
