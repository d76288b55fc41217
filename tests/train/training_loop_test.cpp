// The model-agnostic training loop (train/training_loop.h) driven by a scripted task whose steps
// go wrong on purpose: a non-finite loss or gradient stops the run with an error naming the step
// and the first parameter whose gradient is not finite, or, with train.skip_nonfinite, is skipped
// and counted (the update is not applied, the carried state is dropped), and a run that only
// produces non-finite steps is stopped rather than spinning.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "support/runs.h"
#include "core/factory.h"
#include "nn/linear.h"
#include "support/common.h"
#include "train/training_loop.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// y = w.x + b on one fixed input, loss (y - 1)^2. Draw numbers (from 1) in `nan_loss` report a NaN
// loss; those in `nan_bias_grad` leave a NaN in the bias's gradient with a finite loss.
class ScriptedTask : public train::TrainingTask {
 public:
  ScriptedTask(std::set<int> nan_loss, std::set<int> nan_bias_grad)
      : linear_(2, 1), nan_loss_(std::move(nan_loss)), nan_bias_grad_(std::move(nan_bias_grad)) {}

  nn::Module& model() override { return linear_; }
  const models::PartRules& parts() const override { return parts_; }
  std::int64_t approx_steps_per_epoch() const override { return 1000; }
  void start_epoch() override {}
  std::optional<Step> train_step(StepContext&) override {
    ++draws;
    if (step_time.count() > 0) std::this_thread::sleep_for(step_time);
    const Tensor x = from_vector<float>({1.0f, 2.0f}, Shape{1, 2});
    const Tensor diff = sub(linear_.forward(x), 1.0);
    const Tensor loss = sum(mul(diff, diff));
    backward(loss);
    if (nan_bias_grad_.count(draws)) linear_.bias().set_grad(from_vector<float>({NAN}, Shape{1}));
    return Step{.loss = nan_loss_.count(draws) ? kNaN : loss.item_double(), .tokens = 1};
  }
  void discard_carried_state() override { ++discards; }
  std::map<std::string, std::string> checkpoint_labels() const override { return {}; }
  double validate() override { return 1.0; }
  double test() override { return 1.0; }
  void save(nn::Checkpoint&) const override {}
  void restore(const nn::Checkpoint&) override {}

  int draws = 0, discards = 0;
  std::chrono::milliseconds step_time{0};  // each step sleeps this long (a model of known speed)
  nn::Linear linear_;

 private:
  models::PartRules parts_ = {{"", models::kPartContext}};
  std::set<int> nan_loss_, nan_bias_grad_;
};

train::LoopSettings settings(std::int64_t max_steps, double clip, bool skip) {
  train::LoopSettings s;
  s.optimizer = "sgd";
  s.lr = 0.01;
  s.clip = clip;
  s.max_steps = max_steps;
  s.log_interval = 1;
  s.threads = 1;
  s.skip_nonfinite = skip;
  return s;
}

fs::path fresh_run(const std::string& name) {
  const fs::path d = test::scratch_path(name);
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("training loop: a non-finite loss or gradient names the step and the parameter", "[cli][loop]") {
  for (const double clip : {0.0, 0.25}) {
    INFO("clip " << clip);
    const fs::path dir = fresh_run("define_loop_test_error");
    ScriptedTask grad_task({}, {3});
    train::RunDir run(dir.string(), false);
    Generator gen(1);
    CHECK_THAT(test::error_of([&] { train::run_training(grad_task, settings(10, clip, false), run, false, gen); }),
               Contains("the gradient is not finite (first non-finite gradient: 'bias'") &&
                   Contains("at epoch 1, step 3 (lower train.lr, check the data, or set train.skip_nonfinite"));

    ScriptedTask loss_task({2}, {2});
    train::RunDir run2((dir / "loss").string(), false);
    CHECK_THAT(test::error_of([&] { train::run_training(loss_task, settings(10, clip, false), run2, false, gen); }),
               Contains("the training loss became nan (first non-finite gradient: 'bias') at epoch 1, step 2"));
    fs::remove_all(dir);
  }
}

TEST_CASE("training loop: train.skip_nonfinite skips and counts such steps", "[cli][loop]") {
  const fs::path dir = fresh_run("define_loop_test_skip");
  ScriptedTask task({3, 7}, {5});
  const std::vector<float> w0 = task.linear_.weight().to_vector<float>();
  train::RunDir run(dir.string(), false);
  Generator gen(1);
  const train::TrainResult r = train::run_training(task, settings(10, 0.25, true), run, false, gen);
  CHECK(r.steps == 10);
  CHECK(task.draws == 13);     // 10 updates and 3 skipped batches
  CHECK(task.discards == 3);
  const auto skipped = test::events(dir, "skipped");
  REQUIRE(skipped.size() == 3);
  CHECK(skipped[0]["step"] == 2);  // after 2 completed updates
  CHECK(skipped[1]["step"] == 3);
  CHECK(skipped[2]["step"] == 4);
  CHECK_THAT(skipped[1]["reason"].get<std::string>(), Contains("first non-finite gradient: 'bias'"));
  const auto train = test::events(dir, "train");
  REQUIRE(train.size() == 10);
  CHECK(train.back()["skipped_steps"] == 3);
  for (const auto& t : train) CHECK(std::isfinite(t["loss"].get<double>()));
  // Updates were applied, and none of them was a NaN one.
  const std::vector<float> w1 = task.linear_.weight().to_vector<float>();
  CHECK(w1 != w0);
  for (const float v : w1) CHECK(std::isfinite(v));
  CHECK(std::isfinite(task.linear_.bias().to_vector<float>()[0]));
  fs::remove_all(dir);
}

TEST_CASE("training loop: a run of non-finite steps is stopped, not skipped forever", "[cli][loop]") {
  const fs::path dir = fresh_run("define_loop_test_spin");
  std::set<int> all;
  for (int i = 4; i < 100; ++i) all.insert(i);
  ScriptedTask task(all, {});
  train::RunDir run(dir.string(), false);
  Generator gen(1);
  CHECK_THAT(test::error_of([&] { train::run_training(task, settings(50, 0.25, true), run, false, gen); }),
             Contains("20 steps in a row had a non-finite loss or gradient (the last at epoch 1, after step 3"));
  CHECK(task.draws == 23);
  fs::remove_all(dir);
}

TEST_CASE("training loop: a cosine over a time budget ends at min_lr when the budget ends", "[cli][loop]") {
  // Steps of about 10 ms under a 1-second budget: about 100 steps, a number the config never names.
  // The learning rate warms up by steps, peaks, and has decayed to near min_lr by the last update,
  // which comes right before the budget stops the run.
  const fs::path dir = fresh_run("define_loop_test_time_schedule");
  ScriptedTask task({}, {});
  task.step_time = std::chrono::milliseconds(10);
  train::LoopSettings s = settings(0, 0.25, false);
  s.schedule = "cosine";
  s.warmup_steps = 4;
  s.min_lr = 0.001;
  s.schedule_over_time = true;
  s.max_minutes = 1.0 / 60;
  train::RunDir run(dir.string(), false);
  Generator gen(1);
  const train::TrainResult r = train::run_training(task, s, run, false, gen);
  const auto train = test::events(dir, "train");
  REQUIRE(train.size() == static_cast<std::size_t>(r.steps));
  REQUIRE(r.steps >= 20);  // even on a loaded machine the sleeps dominate a step
  CHECK(r.steps <= 100);
  CHECK(train[0]["lr"] == 0.0);                            // warm-up from 0 by steps
  CHECK(train[2]["lr"].get<double>() == Approx(0.005));    // 2 of 4 warm-up steps
  CHECK(train[4]["lr"].get<double>() == Approx(0.01));     // the peak, after warm-up
  // Past the middle of the budget the cosine is past its middle, and the last update is near min_lr.
  const double mid = train[static_cast<std::size_t>(r.steps * 3 / 4)]["lr"].get<double>();
  CHECK(mid < 0.0055);
  CHECK(train.back()["lr"].get<double>() < 0.001 + 0.1 * (0.01 - 0.001));
  CHECK(train.back()["lr"].get<double>() >= 0.001);
  fs::remove_all(dir);
}
