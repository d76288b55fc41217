// The training loop every `define train` run goes through, whatever it trains: optimizer and
// parameter groups, learning-rate schedule, gradient clipping, per-part gradient norms, the time
// and step budget, non-finite loss detection, evaluation after every epoch and where a budget ends
// inside one (on NT-ASGD's averaged weights once it averages), best / latest checkpoints with exact resume,
// metrics.jsonl and the live progress line. It knows no model type: what it trains is a TrainingTask (a model with its
// data and carried state), e.g. train/lm_trainer.cpp's language-model task.
//
// Config keys of the `train` section the loop reads (defaults in brackets):
//   optimizer [ntasgd] (sgd | adam | adamw | ntasgd), lr [30], weight_decay [1.2e-6], momentum [0],
//   adam_beta1 [0.9], adam_beta2 [0.999], adam_eps [1e-8] (adam, adamw), clip [0.25] (0: none), unit_lr_scale [1],
//   schedule [constant] (constant | cosine | inverse_sqrt), warmup_steps [0], min_lr [0]
//   (cosine's floor), warmup_init_lr [0], schedule_steps (cosine's length; [max_steps, else
//   epochs x steps per epoch]: set it when a run is meant to be stopped and continued with a
//   larger max_steps), schedule_over [steps] (steps | time: cosine's length is re-projected before
//   every update as the steps the run will have made when max_minutes runs out, at its rate so
//   far, so that models of different speeds trained under one time budget each finish their
//   schedule; the curve then depends on the machine's speed), epochs [1], max_minutes [0 = no limit], max_steps
//   [0 = no limit], nonmono [5], log_interval [50], checkpoint_interval [0 = once an epoch],
//   keep_epoch_checkpoints [0] (also keep the weights after each of the last N epochs as
//   epoch<E>.ckpt, which `define average` averages),
//   seed [1111], threads [2], device [cpu] (cpu | cuda[:N] | emu), skip_nonfinite [false] (a step
//   whose loss or gradient is NaN or inf is skipped and counted, as loss-scaling trainers do,
//   instead of stopping the run; 20 such steps in a row stop it), on_checkpoint_error [stop]
//   (stop | continue: a checkpoint that cannot be written, e.g. on a full disk, ends the run with
//   an error naming the file, or is reported and retried at the next checkpoint),
//   distributed [none] (none | mpi | nccl: data-parallel training over the processes mpirun
//   started, see distributed/communicator.h), bucket_mb [25] (gradient bucket size), distributed_timeout
//   [1800] (seconds a collective waits for the other ranks before the run fails), precision [fp32]
//   (fp32 | fp16 | bf16 | auto: mixed-precision training, train/precision.h, with fp16's
//   loss_scale_init [65536], loss_scale_window [2000] and min_loss_scale [1e-4]).
//
// Data-parallel runs: every rank builds the same model, rank 0's parameters are broadcast and
// checked equal on every rank; each step every rank trains on its shard of the global batch and
// the gradients are reduced in buckets while backward runs (distributed/gradient_reducer.h), so N ranks
// take the step one process takes on the whole batch. Clipping sees the global gradient, logged
// losses and token counts are over all ranks, dropout streams differ by rank, and rank 0 alone
// writes metrics and checkpoints (which hold every rank's random stream and carried state, so a
// resume with the same number of processes continues exactly). Evaluation runs on rank 0.
//
// Device-to-host copies: a step's loss and gradient norm stay on the training device (clipping
// is computed there) until a log line, a checkpoint or the end of an epoch needs them, and are read
// then in one copy; a non-finite step found then stops the run naming its epoch and step. With
// train.skip_nonfinite (the host decides before each update) or in a data-parallel run (the loss
// is summed over the ranks) they are read every step. tests/train/train_test.cpp counts the copies.
//
// Crash safety: checkpoints are written atomically, and each records how far metrics.jsonl had
// got, so a run killed at any moment and resumed with --resume logs exactly what an
// uninterrupted run logs (tests/cli/crash_safety_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/device.h"
#include "core/generator.h"
#include "models/parameter_parts.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "train/precision.h"
#include "train/run_log.h"

namespace define::dist {
class Communicator;
}

namespace define::train {

struct LoopSettings {
  std::string optimizer = "ntasgd";
  Device device;
  double lr = 30, weight_decay = 1.2e-6, momentum = 0, clip = 0.25, max_minutes = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double unit_lr_scale = 1.0;  // the token-representation unit's lr as a multiple of lr
  std::string schedule = "constant";
  std::int64_t warmup_steps = 0, schedule_steps = 0;  // 0: max_steps, else epochs x steps per epoch
  bool schedule_over_time = false;                    // train.schedule_over: steps (false) | time
  double min_lr = 0, warmup_init_lr = 0;
  std::int64_t epochs = 1, max_steps = 0, nonmono = 5, log_interval = 50, checkpoint_interval = 0, seed = 1111,
               threads = 2;
  std::int64_t keep_epoch_checkpoints = 0;  // epoch<E>.ckpt of the last N epochs (for `define average`)
  bool skip_nonfinite = false;
  bool stop_on_checkpoint_error = true;  // train.on_checkpoint_error: stop (true) | continue
  std::string distributed = "none";
  double bucket_mb = 25, distributed_timeout = 1800;
  Precision precision = Precision::Fp32;  // train.precision, resolved for `device` ("auto" decided)
  LossScalerSettings loss_scaler;         // fp16 only
  std::optional<DType> allreduce_dtype;   // train.allreduce_dtype; nullopt: the gradients' own (float32)
};

// Reads the keys above from the `train` section; errors name the key.
LoopSettings read_loop_settings(const Config& train);

// "cpu", "cuda[:N]" or "emu" (the emulated GPU), checked against what this build and machine
// have; `key` names the config key in errors.
Device training_device(const std::string& name, const std::string& key);

// One model with its data, as the loop drives it.
class TrainingTask {
 public:
  // What a task tells the loop in the middle of a step (what data-parallel gradient reduction
  // needs to know); the defaults ignore it.
  class StepContext {
   public:
    virtual ~StepContext() = default;
    // The step's batches are drawn, before any backward pass: this process's target tokens.
    virtual void batches_drawn(std::int64_t /*tokens*/) {}
    // Right before the step's last backward pass (the one after which the gradients are final),
    // from `loss`.
    virtual void last_backward(const Tensor& /*loss*/) {}
    // What the task multiplies each objective by before its backward pass: fp16's loss scale
    // (train/precision.h), 1 otherwise. The loop unscales the gradients.
    double loss_scale() const { return loss_scale_; }
    void set_loss_scale(double s) { loss_scale_ = s; }

   private:
    double loss_scale_ = 1.0;
  };

  virtual ~TrainingTask() = default;

  virtual nn::Module& model() = 0;
  virtual const models::PartRules& parts() const = 0;
  virtual std::int64_t approx_steps_per_epoch() const = 0;

  // Back to the first batch of the training data, carried state reset.
  virtual void start_epoch() = 0;
  struct Step {
    double loss = 0;          // the batch's mean loss per token (what is logged)
    std::int64_t tokens = 0;  // target tokens in the batch
    double lr_scale = 1;      // this batch's learning-rate multiplier (AWD-LSTM's window length)
    // The same loss as a 0-d tensor left where it was computed (then `loss` is not read): the
    // loop reads it only when it logs or checks the window, so a step on a GPU does not wait
    // for the device.
    Tensor loss_tensor{};
  };
  // Draws the next batch and runs forward and backward into the parameters' gradients (zeroed by
  // the loop before), telling `ctx` as it goes; nullopt when the epoch's data is used up (which
  // must happen at the same step on every rank of a data-parallel run).
  virtual std::optional<Step> train_step(StepContext& ctx) = 0;
  // The loop skipped the last step (its loss or gradient was not finite): forget whatever it
  // carried forward (e.g. a recurrent state that may now hold NaN).
  virtual void discard_carried_state() = 0;
  // Mean loss per token on the validation / test split, in eval mode without a graph.
  virtual double validate() = 0;
  virtual double test() = 0;

  // Strings stamped on every checkpoint the loop writes (latest and best), e.g. the vocabulary's
  // fingerprint, so the commands that read one can check the files beside it.
  virtual std::map<std::string, std::string> checkpoint_labels() const = 0;
  // The task's share of a checkpoint: data position and carried state.
  virtual void save(nn::Checkpoint& ck) const = 0;
  virtual void restore(const nn::Checkpoint& ck) = 0;
};

struct TrainResult {
  double valid_loss = 0;  // of the best checkpoint
  double test_loss = 0;
  std::int64_t steps = 0;
  double seconds = 0;
};

// For tests: called with the step number after each completed training step (after its log line
// and checkpoint), e.g. to count what a step costs; an empty function removes it. Process-wide.
void set_step_observer(std::function<void(std::int64_t step)> observer);
// For tests: called in every step after its backward pass, before the loop reads the gradients,
// with the number the step will have (e.g. to plant an inf in one gradient and see the loss
// scaler skip exactly that step). Process-wide; an empty function removes it.
void set_gradient_observer(std::function<void(std::int64_t step, const optim::NamedParameters& params)> observer);

// How a run starts: from scratch, from its own latest.ckpt (resume), or from another run's
// weights (init_from: fine-tuning). Converts from a bool (resume or not).
struct StartOptions {
  StartOptions(bool resume_run = false) : resume(resume_run) {}  // NOLINT: a bool is a plain resume
  bool resume = false;
  // A run folder (its best.ckpt, else latest.ckpt) or a checkpoint file whose weights start a new
  // run; the optimizer, schedule, data position and random streams start fresh. Tensors are
  // matched by name: a shape or vocabulary (checkpoint label) that differs is an error, and the
  // tensors the checkpoint lacks (kept at their initial values) and those it has that the model
  // does not are printed and logged.
  std::string init_from;
  // On a resume: the optimizer's state (momentum, Adam's moments, NT-ASGD's averaging) starts
  // fresh; the learning-rate schedule starts over at the resumed step (its warm-up again, then a
  // cosine over the steps left, or train.schedule_steps).
  bool reset_optimizer = false, reset_schedule = false;
};

// The checkpoint --init-from names: a run folder's best.ckpt (else latest.ckpt) or the file
// itself. Throws naming the path when there is none.
std::string init_checkpoint_path(const std::string& run_or_checkpoint);
// The folder an --init-from's files (vocab.txt, subword.model) are read from.
std::string init_folder(const std::string& run_or_checkpoint);

// Runs (or, with resume, continues from run/latest.ckpt) the training `s` describes. The model
// must be on s.device. model_gen is the model's random stream (saved in checkpoints). `comm`:
// the data-parallel group (null: one process); the task must already train on its rank's shard.
TrainResult run_training(TrainingTask& task, const LoopSettings& s, RunDir& run, const StartOptions& start,
                         Generator& model_gen, dist::Communicator* comm = nullptr);

// "epoch<E>.ckpt": the weights kept after epoch E (train.keep_epoch_checkpoints).
std::string epoch_checkpoint_name(std::int64_t epoch);

// The field `key` of a checkpoint's run section; throws naming it when absent.
const std::string& checkpoint_field(const nn::Checkpoint& ck, const std::string& key);

}  // namespace define::train
