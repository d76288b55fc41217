// Learning-rate schedules. Each is a pure function of its position so that a resumed run only
// needs the step (or epoch) count: lr(step) gives the learning rate for the update that follows
// `step` completed updates (step 0 = the first update), as fairseq's step_update(num_updates).
// ReduceOnPlateau is the exception: it depends on the history of the metric, which it condenses
// into a few scalars with state_dict()/load_state_dict() (or replays a logged history).
//
// Apply one with opt.set_lr(schedule.lr(step)) (every param group gets that lr).
// Invalid hyper-parameters throw define::Error naming the schedule and the parameter.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace define::optim {

// base_lr * gamma^floor(epoch / step_size) (torch.optim.lr_scheduler.StepLR).
class StepDecay {
 public:
  StepDecay(double base_lr, std::int64_t step_size, double gamma = 0.1);
  double lr(std::int64_t epoch) const;

 private:
  double base_lr_;
  std::int64_t step_size_;
  double gamma_;
};

// Linear warm-up from warmup_init_lr to peak_lr over warmup_steps updates, then half a cosine
// from peak_lr down to min_lr at total_steps, and min_lr afterwards:
//   s < W:       warmup_init_lr + (peak_lr - warmup_init_lr) * s / W
//   W <= s < T:  min_lr + (peak_lr - min_lr) * (1 + cos(pi * (s - W) / (T - W))) / 2
//   s >= T:      min_lr
struct WarmupCosineOptions {
  double peak_lr = 1e-3;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;  // > warmup_steps
  double min_lr = 0;
  double warmup_init_lr = 0;
};

class WarmupCosine {
 public:
  explicit WarmupCosine(WarmupCosineOptions opt);
  double lr(std::int64_t step) const;

 private:
  WarmupCosineOptions opt_;
};

// A cosine sized by a time budget instead of a step count: the number of updates a run will have
// made when `budget_s` seconds have passed, projected from its rate so far (`steps` updates in
// `elapsed_s` seconds), and never less than `at_least`. Recomputed before every update, it makes a
// WarmupCosine end at min_lr when the budget ends on whatever machine the run is on, so runs of
// different models under one time budget each get a whole schedule. It depends only on (steps,
// elapsed_s), both of which a checkpoint holds, so a resumed run continues the same curve.
std::int64_t projected_total_steps(std::int64_t steps, double elapsed_s, double budget_s, std::int64_t at_least);

// fairseq's inverse_sqrt: linear warm-up from warmup_init_lr to peak_lr over warmup_steps, then
// lr = peak_lr * sqrt(warmup_steps) / sqrt(s), which meets the warm-up at s = warmup_steps.
// With warmup_steps = 0 it is peak_lr / sqrt(max(s, 1)) (fairseq would divide by zero at s = 0).
struct InverseSqrtOptions {
  double peak_lr = 5e-4;
  std::int64_t warmup_steps = 4000;
  double warmup_init_lr = 0;
};

class InverseSqrt {
 public:
  explicit InverseSqrt(InverseSqrtOptions opt);
  double lr(std::int64_t step) const;

 private:
  InverseSqrtOptions opt_;
};

// torch.optim.lr_scheduler.ReduceLROnPlateau for one learning rate. After each evaluation,
// step(metric):
//   better = metric < best * (1 - threshold)   (Rel)   or   metric < best - threshold   (Abs)
//            (mirrored for Mode::Max); better resets the bad-evaluation count, else it grows;
//   during cooldown the count is held at 0;
//   count > patience: lr = max(lr * factor, min_lr) (changes smaller than eps are dropped), then
//            cooldown evaluations without counting.
struct PlateauOptions {
  enum class Mode { Min, Max };
  enum class ThresholdMode { Rel, Abs };
  Mode mode = Mode::Min;
  double factor = 0.1;  // in (0, 1)
  std::int64_t patience = 10;
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  std::int64_t cooldown = 0;
  double min_lr = 0;
  double eps = 1e-8;
};

class ReduceOnPlateau {
 public:
  ReduceOnPlateau(double initial_lr, PlateauOptions opt = {});

  // Records one evaluation; returns the learning rate to use from now on.
  double step(double metric);
  double lr() const { return lr_; }
  double best() const { return best_; }
  std::int64_t num_bad_evals() const { return num_bad_; }
  std::int64_t evals() const { return evals_; }

  // The lr after replaying a whole metric history from the start (a pure function of it).
  static double lr_after(double initial_lr, const PlateauOptions& opt, const std::vector<double>& history);

  // Keys: lr, best, num_bad_evals, cooldown_counter, evals. load_state_dict throws naming a
  // missing, unknown or invalid key and then changes nothing.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  bool is_better(double a) const;

  PlateauOptions opt_;
  double lr_;
  double best_;
  std::int64_t num_bad_ = 0;
  std::int64_t cooldown_counter_ = 0;
  std::int64_t evals_ = 0;
};

}  // namespace define::optim
