#include "train/training_loop.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <zlib.h>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/crash_point.h"
#include "core/error.h"
#include "core/process_info.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "kernels/devices.h"
#include "nn/optim/optim.h"
#include "train/run_loader.h"

namespace define::train {
namespace {

constexpr const char* kOp = "train";
constexpr const char* kLatest = "latest.ckpt";
constexpr const char* kBest = "best.ckpt";

void require_positive(const Config& c, const char* key, std::int64_t v) {
  if (v < 1) fail(kOp, "{} must be positive, got {}", c.path(key), v);
}

// One parameter group, or two when train.unit_lr_scale != 1: the token-representation unit
// (part "DeFINE") at lr * scale, everything else at lr. The loop keeps that ratio through every
// schedule and per-batch scaling (group lrs are always base lr x factor).
std::vector<optim::GroupSpec> parameter_groups(
    const LoopSettings& t, const optim::NamedParameters& all,
    const std::vector<std::pair<std::string, optim::NamedParameters>>& parts) {
  optim::GroupSpec rest, unit;
  if (t.unit_lr_scale == 1.0) {
    rest.params = all;
    return {std::move(rest)};
  }
  unit.lr = t.lr * t.unit_lr_scale;
  for (const auto& [part, members] : parts)
    for (const auto& member : members) (part == models::kPartDefine ? unit : rest).params.push_back(member);
  if (unit.params.empty()) fail(kOp, "train.unit_lr_scale is set but the model has no token-representation unit");
  return {std::move(rest), std::move(unit)};
}

void check_optimizer_name(const std::string& name) {
  for (const char* known : {"sgd", "adam", "adamw", "ntasgd"})
    if (name == known) return;
  fail(kOp, "unknown train.optimizer '{}' (expected sgd, adam, adamw or ntasgd)", name);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const LoopSettings& t, std::vector<optim::GroupSpec> params) {
  if (t.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions{.lr = t.lr, .momentum = t.momentum, .weight_decay = t.weight_decay});
  if (t.optimizer == "ntasgd")
    return std::make_unique<optim::NTASGD>(
        params, optim::NTASGDOptions{.lr = t.lr, .weight_decay = t.weight_decay, .nonmono = t.nonmono});
  if (t.optimizer == "adam")
    return std::make_unique<optim::Adam>(
        params,
        optim::AdamOptions{.lr = t.lr, .betas = {t.beta1, t.beta2}, .eps = t.eps, .weight_decay = t.weight_decay});
  if (t.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        params,
        optim::AdamWOptions{.lr = t.lr, .betas = {t.beta1, t.beta2}, .eps = t.eps, .weight_decay = t.weight_decay});
  check_optimizer_name(t.optimizer);
  fail(kOp, "train.optimizer '{}' has no constructor", t.optimizer);
}

// The learning rate as a multiple of train.lr for the update after `step` completed ones,
// `elapsed_s` seconds into the run (read by a schedule over time only).
class LrFactor {
 public:
  LrFactor(const LoopSettings& t, std::int64_t total_steps)
      : lr_(t.lr), over_time_(t.schedule_over_time), budget_s_(t.max_minutes * 60) {
    if (over_time_) {
      if (t.schedule != "cosine")
        fail(kOp, "train.schedule_over time needs train.schedule cosine (the schedule that ends), got '{}'",
             t.schedule);
      if (!(t.max_minutes > 0)) fail(kOp, "train.schedule_over time needs a time budget: set train.max_minutes");
      if (t.schedule_steps > 0)
        fail(kOp, "train.schedule_steps and train.schedule_over time both size the schedule; set one of them");
      // A placeholder length; operator() projects the real one before every update.
      total_steps = t.warmup_steps + 1;
    }
    if (t.schedule == "constant") {
      if (t.warmup_steps > 0 || t.schedule_steps > 0)
        fail(kOp, "train.warmup_steps and train.schedule_steps need train.schedule cosine or inverse_sqrt");
      return;
    }
    if (t.optimizer == "ntasgd")
      fail(kOp, "train.schedule '{}' cannot drive ntasgd (it switches to averaging by itself); use sgd, adam or adamw",
           t.schedule);
    if (t.schedule == "cosine") {
      if (total_steps <= t.warmup_steps)
        fail(kOp,
             "train.schedule cosine needs more steps ({}, train.schedule_steps or train.max_steps) than "
             "train.warmup_steps ({})",
             total_steps, t.warmup_steps);
      cosine_ = {.peak_lr = t.lr,
                 .warmup_steps = t.warmup_steps,
                 .total_steps = total_steps,
                 .min_lr = t.min_lr,
                 .warmup_init_lr = t.warmup_init_lr};
      schedule_ = optim::WarmupCosine(cosine_);
    } else if (t.schedule == "inverse_sqrt") {
      schedule_ =
          optim::InverseSqrt({.peak_lr = t.lr, .warmup_steps = t.warmup_steps, .warmup_init_lr = t.warmup_init_lr});
    } else {
      fail(kOp, "unknown train.schedule '{}' (expected constant, cosine or inverse_sqrt)", t.schedule);
    }
  }
  double operator()(std::int64_t step, double elapsed_s) const {
    if (const auto* c = std::get_if<optim::WarmupCosine>(&schedule_)) {
      if (!over_time_) return c->lr(step) / lr_;
      const std::int64_t total =
          optim::projected_total_steps(step, elapsed_s, budget_s_, std::max(step, cosine_.warmup_steps) + 1);
      optim::WarmupCosineOptions projected = cosine_;
      projected.total_steps = total;
      return optim::WarmupCosine(projected).lr(step) / lr_;
    }
    if (const auto* s = std::get_if<optim::InverseSqrt>(&schedule_)) return s->lr(step) / lr_;
    return 1.0;
  }

 private:
  double lr_;
  bool over_time_;
  double budget_s_;
  optim::WarmupCosineOptions cosine_{};  // a schedule over time rebuilds its cosine from these
  std::variant<std::monostate, optim::WarmupCosine, optim::InverseSqrt> schedule_;
};

// One update with every group's lr at its base times `factor`.
void step_with_factor(optim::Optimizer& optimizer, const std::vector<double>& base_lrs, double factor) {
  for (std::size_t g = 0; g < base_lrs.size(); ++g) optimizer.set_lr(g, base_lrs[g] * factor);
  optimizer.step();
  for (std::size_t g = 0; g < base_lrs.size(); ++g) optimizer.set_lr(g, base_lrs[g]);
}

std::string state_string(const GeneratorState& s) { return fmt::format("{} {}", s.seed, s.offset); }
GeneratorState parse_state(const std::string& s, const char* what) {
  GeneratorState g;
  if (std::sscanf(s.c_str(), "%lu %lu", &g.seed, &g.offset) != 2)
    fail(kOp, "checkpoint field {} is malformed: '{}'", what, s);
  return g;
}

// Everything of a run that is not model, optimizer or task: saved into and restored from checkpoints.
struct Progress {
  std::int64_t epoch = 1;
  std::int64_t step = 0;
  double best_valid = std::numeric_limits<double>::infinity();
  double seconds = 0;
  bool mid_epoch = false;    // the data position is inside `epoch`
  std::int64_t skipped = 0;  // steps skipped for a non-finite loss or gradient (train.skip_nonfinite)
  // The log window in progress (its mean is logged every log_interval steps): saved, so a run
  // resumed between two log lines logs the same means as an uninterrupted one.
  double window_loss = 0, window_grad_norm = 0;
  std::int64_t window_steps = 0, window_tokens = 0;
};

// A numeric run field of a checkpoint. A checkpoint with a valid CRC can still have been written by
// hand or by another tool: a field that is not a number is an error naming it, not an exception
// from std::stod.
template <typename T>
T number_field(const nn::Checkpoint& ck, const std::string& key) {
  const std::string& text = checkpoint_field(ck, key);
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail(kOp, "checkpoint field '{}' is not a number in range: '{}'", key, text);
  return value;
}

// Optional fields (absent from checkpoints of older versions) read as `fallback`.
template <typename T>
T number_field_or(const nn::Checkpoint& ck, const std::string& key, T fallback) {
  return ck.run.count(key) ? number_field<T>(ck, key) : fallback;
}

// A step whose loss or gradient norm is not finite: what to say about it.
std::string nonfinite_reason(double loss, double norm, const optim::NamedParameters& params) {
  const std::string who = optim::first_nonfinite_gradient(params);
  const std::string grad =
      who.empty() ? fmt::format("gradient norm {}", norm) : fmt::format("first non-finite gradient: '{}'", who);
  if (!std::isfinite(loss)) return fmt::format("the training loss became {} ({})", loss, grad);
  return fmt::format("the gradient is not finite ({}, loss {})", grad, loss);
}

constexpr std::int64_t kMaxSkippedInARow = 20;  // beyond this, skipping is not helping

std::function<void(std::int64_t)>& step_observer() {
  static std::function<void(std::int64_t)> f;
  return f;
}

[[noreturn]] void fail_nonfinite(const std::string& why, std::int64_t epoch, std::int64_t step) {
  fail(kOp, "{} at epoch {}, step {} (lower train.lr, check the data, or set train.skip_nonfinite to skip such steps)",
       why, epoch, step);
}

// 0-d tensors as doubles, with one device-to-host copy per device they live on (CPU ones are read
// in place).
std::vector<double> read_scalars(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  std::vector<double> out(ts.size());
  std::vector<bool> done(ts.size(), false);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (done[i]) continue;
    const Device dev = ts[i].device();
    std::vector<Tensor> same;
    std::vector<std::size_t> where;
    for (std::size_t j = i; j < ts.size(); ++j) {
      if (done[j] || ts[j].device() != dev) continue;
      same.push_back(reshape(to_dtype(ts[j], DType::Float64), {1}));
      where.push_back(j);
      done[j] = true;
    }
    const std::vector<double> v = contiguous(concat(same, 0)).to_vector<double>();
    for (std::size_t k = 0; k < where.size(); ++k) out[where[k]] = v[k];
  }
  return out;
}

// The numbers each step leaves on the training device (its loss and gradient norm, and on a
// step before a log line the per-part gradient norms), kept there until the loop needs them: a
// log line, a checkpoint, the end of an epoch. Reading them then takes one device-to-host copy
// where reading each as it was made took two or more per step, each blocking the host until the
// device had caught up. (A non-finite step is found at that read, named by its epoch and step as
// before; the updates after it have run by then, but the run stops before anything is saved.)
class PendingSteps {
 public:
  struct Numbers {
    std::int64_t epoch, step;
    double loss, norm;
  };

  void add(std::int64_t epoch, std::int64_t step, Tensor loss, Tensor norm) {
    steps_.emplace_back(epoch, step);
    values_.push_back(std::move(loss));
    values_.push_back(std::move(norm));
  }
  void add_part_norm(const std::string& name, Tensor norm) {
    part_names_.push_back(name);
    parts_.push_back(std::move(norm));
  }

  // Every pending step in order, and the part norms into `part_norms`; then empty.
  std::vector<Numbers> read(std::map<std::string, double>& part_norms) {
    std::vector<Tensor> all = values_;
    all.insert(all.end(), parts_.begin(), parts_.end());
    std::vector<Numbers> out;
    if (all.empty()) return out;
    const std::vector<double> v = read_scalars(all);
    for (std::size_t i = 0; i < steps_.size(); ++i)
      out.push_back({steps_[i].first, steps_[i].second, v[2 * i], v[2 * i + 1]});
    for (std::size_t i = 0; i < parts_.size(); ++i) part_norms[part_names_[i]] = v[values_.size() + i];
    steps_.clear();
    values_.clear();
    part_names_.clear();
    parts_.clear();
    return out;
  }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> steps_;  // epoch, step
  std::vector<Tensor> values_;                                // loss, norm of each step
  std::vector<std::string> part_names_;
  std::vector<Tensor> parts_;
};

// A fingerprint of every parameter's bytes: data-parallel ranks must hold the same weights.
std::uint64_t parameter_checksum(const optim::NamedParameters& params) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [name, t] : params) {
    const Tensor host = contiguous(to_device(detach(t), Device::cpu()));
    const auto* bytes = static_cast<const Bytef*>(host.raw_data());
    std::size_t left = static_cast<std::size_t>(host.numel()) * dtype_size(host.dtype());
    for (std::size_t chunk; left > 0; bytes += chunk, left -= chunk) {  // crc32 takes 32-bit lengths
      chunk = std::min<std::size_t>(left, std::size_t{1} << 30);
      crc = crc32(crc, bytes, static_cast<uInt>(chunk));
    }
  }
  return crc;
}

// Rank r's dropout stream in a data-parallel run: rank 0 keeps the run's seed (so one process and
// rank 0 draw alike), the others a seed derived from it and the rank.
std::uint64_t rank_seed(std::uint64_t seed, int rank) {
  return rank == 0 ? seed : seed ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(rank));
}

// The loop's side of a data-parallel step: the reducer learns this rank's tokens and when the
// last backward starts.
class ReducingContext final : public TrainingTask::StepContext {
 public:
  explicit ReducingContext(dist::GradientReducer& reducer) : reducer_(reducer) {}
  void batches_drawn(std::int64_t tokens) override {
    global_tokens_ = reducer_.begin_step(tokens);
    drawn_ = true;
  }
  void last_backward(const Tensor& loss) override {
    if (!drawn_) fail(kOp, "internal: a task started its last backward before reporting its batches");
    reducer_.watch_backward(loss);
  }
  // After the task's step: the reduced gradients in place; the step's tokens over all ranks.
  std::int64_t finish() {
    if (!drawn_) fail(kOp, "internal: the task did not report its batches to the data-parallel step");
    reducer_.finish();
    drawn_ = false;
    return global_tokens_;
  }

 private:
  dist::GradientReducer& reducer_;
  std::int64_t global_tokens_ = 0;
  bool drawn_ = false;
};

}  // namespace

void set_step_observer(std::function<void(std::int64_t)> observer) { step_observer() = std::move(observer); }

namespace {
std::function<void(std::int64_t, const optim::NamedParameters&)>& gradient_observer() {
  static std::function<void(std::int64_t, const optim::NamedParameters&)> f;
  return f;
}
}  // namespace

void set_gradient_observer(std::function<void(std::int64_t, const optim::NamedParameters&)> observer) {
  gradient_observer() = std::move(observer);
}

Device training_device(const std::string& name, const std::string& key) {
  Device d;
  try {
    d = Device::parse(name);
  } catch (const Error& e) {
    fail(kOp, "{}: {}", key, e.what());
  }
  if (d.is_cpu()) return d;
  const kernels::DeviceAvailability a = kernels::register_devices();
  if (d.is_emu() && !a.emu) fail(kOp, "{} = '{}': this build has no emulated device", key, name);
  if (d.is_emu() && d.index >= a.emu_devices)
    fail(kOp, "{} = '{}': the emulator has {} devices (CUDA_EMU_DEVICES)", key, name, a.emu_devices);
  if (d.is_cuda() && d.index >= a.cuda_devices)
    fail(kOp, "{} = '{}': {}", key, name,
         kernels::built_with_cuda() ? fmt::format("{} GPU(s) found", a.cuda_devices)
                                    : std::string("this build has no CUDA backend (configure with DEFINE_CUDA=ON)"));
  return d;
}

LoopSettings read_loop_settings(const Config& c) {
  LoopSettings t;
  t.optimizer = c.get_string("optimizer", t.optimizer);
  t.distributed = c.get_string("distributed", t.distributed);
  if (t.distributed != "none" && t.distributed != "mpi" && t.distributed != "nccl")
    fail(kOp, "{} must be none, mpi or nccl, got '{}'", c.path("distributed"), t.distributed);
  // In a data-parallel run each rank of a machine takes its own GPU: "cuda" means cuda:<local rank>
  // (or the one GPU a per-rank CUDA_VISIBLE_DEVICES leaves it).
  std::string device = c.get_string("device", "cpu");
  if (t.distributed != "none" && device == "cuda")
    device =
        fmt::format("cuda:{}", dist::choose_rank_gpu(dist::node_local_rank(), kernels::register_devices().cuda_devices,
                                                     std::getenv("CUDA_VISIBLE_DEVICES")));
  t.device = training_device(device, c.path("device"));
  t.lr = c.get_double("lr", t.lr);
  t.weight_decay = c.get_double("weight_decay", t.weight_decay);
  t.momentum = c.get_double("momentum", t.momentum);
  t.beta1 = c.get_double("adam_beta1", t.beta1);
  t.beta2 = c.get_double("adam_beta2", t.beta2);
  t.eps = c.get_double("adam_eps", t.eps);
  t.unit_lr_scale = c.get_double("unit_lr_scale", t.unit_lr_scale);
  t.clip = c.get_double("clip", t.clip);
  t.schedule = c.get_string("schedule", t.schedule);
  t.warmup_steps = c.get_int("warmup_steps", t.warmup_steps);
  t.schedule_steps = c.get_int("schedule_steps", t.schedule_steps);
  const std::string schedule_over = c.get_string("schedule_over", "steps");
  if (schedule_over != "steps" && schedule_over != "time")
    fail(kOp, "{} must be 'steps' or 'time', got '{}'", c.path("schedule_over"), schedule_over);
  t.schedule_over_time = schedule_over == "time";
  t.min_lr = c.get_double("min_lr", t.min_lr);
  t.warmup_init_lr = c.get_double("warmup_init_lr", t.warmup_init_lr);
  t.epochs = c.get_int("epochs", t.epochs);
  t.max_minutes = c.get_double("max_minutes", t.max_minutes);
  t.max_steps = c.get_int("max_steps", t.max_steps);
  t.nonmono = c.get_int("nonmono", t.nonmono);
  t.log_interval = c.get_int("log_interval", t.log_interval);
  t.checkpoint_interval = c.get_int("checkpoint_interval", t.checkpoint_interval);
  t.keep_epoch_checkpoints = c.get_int("keep_epoch_checkpoints", t.keep_epoch_checkpoints);
  if (t.keep_epoch_checkpoints < 0)
    fail(kOp, "{} must be >= 0, got {}", c.path("keep_epoch_checkpoints"), t.keep_epoch_checkpoints);
  t.seed = c.get_int("seed", t.seed);
  t.threads = c.get_int("threads", t.threads);
  t.skip_nonfinite = c.get_bool("skip_nonfinite", t.skip_nonfinite);
  const std::string on_error = c.get_string("on_checkpoint_error", "stop");
  if (on_error != "stop" && on_error != "continue")
    fail(kOp, "{} must be 'stop' or 'continue', got '{}'", c.path("on_checkpoint_error"), on_error);
  t.stop_on_checkpoint_error = on_error == "stop";
  t.precision = resolve_precision(c.get_string("precision", "fp32"), t.device, c.path("precision"));
  t.loss_scaler.init = c.get_double("loss_scale_init", t.loss_scaler.init);
  t.loss_scaler.window = c.get_int("loss_scale_window", t.loss_scaler.window);
  t.loss_scaler.min_scale = c.get_double("min_loss_scale", t.loss_scaler.min_scale);
  if (t.precision == Precision::Fp16) static_cast<void>(DynamicLossScaler(t.loss_scaler));  // checks the keys now
  t.allreduce_dtype =
      read_allreduce_dtype(c.get_string("allreduce_dtype", "float32"), t.precision, c.path("allreduce_dtype"));
  t.bucket_mb = c.get_double("bucket_mb", t.bucket_mb);
  if (!(t.bucket_mb > 0)) fail(kOp, "{} must be positive, got {}", c.path("bucket_mb"), t.bucket_mb);
  t.distributed_timeout = c.get_double("distributed_timeout", t.distributed_timeout);
  if (!(t.distributed_timeout >= 0))
    fail(kOp, "{} must be >= 0 (0: wait forever), got {}", c.path("distributed_timeout"), t.distributed_timeout);
  require_positive(c, "epochs", t.epochs);
  require_positive(c, "log_interval", t.log_interval);
  require_positive(c, "threads", t.threads);
  if (!(t.lr > 0)) fail(kOp, "{} must be positive, got {}", c.path("lr"), t.lr);
  if (!(t.unit_lr_scale > 0)) fail(kOp, "{} must be positive, got {}", c.path("unit_lr_scale"), t.unit_lr_scale);
  if (t.warmup_steps < 0) fail(kOp, "{} must be >= 0, got {}", c.path("warmup_steps"), t.warmup_steps);
  if (t.schedule_steps < 0) fail(kOp, "{} must be >= 0, got {}", c.path("schedule_steps"), t.schedule_steps);
  // What can be checked before any data is read is checked now: the optimizer's name and the
  // schedule with its length when the config fixes it (schedule_steps or max_steps; otherwise it
  // is epochs x steps per epoch, known once the data is).
  check_optimizer_name(t.optimizer);
  const std::int64_t fixed_steps = t.schedule_steps > 0 ? t.schedule_steps : t.max_steps;
  static_cast<void>(LrFactor(t, fixed_steps > 0 ? fixed_steps : std::numeric_limits<std::int64_t>::max()));
  return t;
}

std::string init_checkpoint_path(const std::string& run_or_checkpoint) {
  std::error_code ec;
  if (std::filesystem::is_directory(run_or_checkpoint, ec)) return choose_checkpoint(run_or_checkpoint, "");
  if (!std::filesystem::is_regular_file(run_or_checkpoint, ec))
    fail(kOp, "--init-from '{}' is neither a run folder nor a checkpoint file", run_or_checkpoint);
  return run_or_checkpoint;
}

std::string init_folder(const std::string& run_or_checkpoint) {
  std::error_code ec;
  if (std::filesystem::is_directory(run_or_checkpoint, ec)) return run_or_checkpoint;
  const std::filesystem::path parent = std::filesystem::path(run_or_checkpoint).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string epoch_checkpoint_name(std::int64_t epoch) { return fmt::format("epoch{}.ckpt", epoch); }

const std::string& checkpoint_field(const nn::Checkpoint& ck, const std::string& key) {
  const auto it = ck.run.find(key);
  if (it == ck.run.end()) fail(kOp, "checkpoint lacks the run field '{}' (not written by define train?)", key);
  return it->second;
}

namespace {

// One call of run_training: the run's state, and its phases in the order they run:
//   TrainingRun (set-up)  threads, communicator, optimizer and parameter groups, schedule;
//   resume_or_start       latest.ckpt's weights, optimizer, random streams and progress, or a start;
//   start_data_parallel   rank 0's weights on every rank, the gradient reducer;
//   train_epoch           steps until the epoch's data or the budget ends (train_step, log_window);
//   end_epoch             validation, best / epoch / latest checkpoints, NT-ASGD's trigger;
//   finish                the budget's mid-epoch validation and the final evaluation.
class TrainingRun {
 public:
  TrainingRun(TrainingTask& task, const LoopSettings& ts, RunDir& run, Generator& model_gen, dist::Communicator* comm);
  void resume_or_start(const StartOptions& start);
  void start_data_parallel();
  TrainResult train();

 private:
  using Clock = std::chrono::steady_clock;

  bool train_epoch();  // false when the budget ended inside the epoch
  // One batch: false when the epoch's data is used up; sets out_of_budget_ when the budget is.
  bool train_step();
  void log_window(double lr);
  void end_epoch();
  TrainResult finish();
  // A new run's weights from another run's checkpoint (StartOptions::init_from).
  void init_from(const std::string& run_or_checkpoint);
  // The schedule as seen from its origin (0, or the step a --reset-schedule resumed at).
  void build_schedule();

  // The pending steps' numbers into the log window; a non-finite one stops the run.
  void settle();
  // `resume_epoch`: the epoch a resumed run starts in (the next one once an epoch has ended).
  // Collective in a data-parallel run (every rank's random stream and carried state are gathered),
  // written by rank 0.
  void save_latest(std::int64_t resume_epoch);
  // A checkpoint that cannot be written (full disk, file-size limit, permissions) never passes
  // silently: it stops the run, or with train.on_checkpoint_error = continue is reported on
  // stderr and in metrics.jsonl and tried again at the next checkpoint.
  template <typename Save>
  void checkpoint(const char* which, Save&& save);
  // The model's weights (no optimizer) with the task's labels and the epoch and step, as `file`.
  void save_weights(const std::string& file);
  // Validates the weights in place (the caller swaps in NT-ASGD's averages when it averages) and
  // keeps them as best.ckpt when they beat every earlier validation. Data parallel: rank 0
  // validates (every rank holds the same weights) and tells the others.
  double validate_and_keep_best(bool end_of_budget);
  double elapsed() const {
    return session_start_seconds_ + std::chrono::duration<double>(Clock::now() - session_start_).count();
  }

  TrainingTask& task_;
  const LoopSettings& ts_;
  RunDir& run_;
  Generator& model_gen_;
  std::unique_ptr<dist::Communicator> own_comm_;
  dist::Communicator* comm_;
  int rank_ = 0, world_ = 1;
  bool writer_ = true;  // rank 0 alone writes metrics and checkpoints and prints
  nn::Module& model_;
  optim::NamedParameters named_;
  // Gradient norms per part (DeFINE unit, context model, input-output) go into the metrics log:
  // what shows one part's gradients swamping the shared clip. The unit's own lr uses the same split.
  std::vector<std::pair<std::string, optim::NamedParameters>> parts_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::NTASGD* ntasgd_ = nullptr;
  std::vector<double> base_lrs_;
  std::int64_t total_steps_ = 0;
  std::optional<LrFactor> lr_factor_;
  // Where the learning-rate schedule starts: step 0 at second 0, or where --reset-schedule restarted it.
  std::int64_t schedule_origin_step_ = 0;
  double schedule_origin_s_ = 0;
  Progress p_;
  std::unique_ptr<dist::GradientReducer> reducer_;

  // Steps are read one by one (a copy each) where the host must decide before the update: to skip
  // a non-finite step, or to sum the loss over the ranks of a data-parallel run. Otherwise their
  // numbers wait on the device (PendingSteps) until settle() adds them to the log window.
  bool read_every_step_ = false;
  PendingSteps pending_;
  std::map<std::string, double> part_norms_;
  double budget_s_ = std::numeric_limits<double>::infinity();
  std::optional<ProgressLine> progress_;
  bool out_of_budget_ = false;
  std::int64_t skipped_in_a_row_ = 0;
  // Mixed precision: the dtype of the forward's GEMM inputs, and fp16's loss scaler.
  std::optional<DType> lower_;
  std::optional<DynamicLossScaler> scaler_;
  Clock::time_point window_start_, session_start_;
  double session_start_seconds_ = 0;
};

TrainingRun::TrainingRun(TrainingTask& task, const LoopSettings& ts, RunDir& run, Generator& model_gen,
                         dist::Communicator* comm)
    : task_(task), ts_(ts), run_(run), model_gen_(model_gen), comm_(comm), model_(task.model()) {
  omp_set_num_threads(static_cast<int>(ts_.threads));
  if (!comm_) {
    own_comm_ = dist::make_communicator("none", ts_.device);
    comm_ = own_comm_.get();
  }
  dist::set_collective_timeout_s(ts_.distributed_timeout);
  rank_ = comm_->rank();
  world_ = comm_->world_size();
  writer_ = rank_ == 0;
  named_ = optim::to_named_parameters(model_.named_parameters());
  parts_ = models::group_by_part(named_, task_.parts());
  optimizer_ = make_optimizer(ts_, parameter_groups(ts_, named_, parts_));
  ntasgd_ = dynamic_cast<optim::NTASGD*>(optimizer_.get());
  for (std::size_t g = 0; g < optimizer_->num_groups(); ++g) base_lrs_.push_back(optimizer_->lr(g));
  const std::int64_t steps_per_epoch = task_.approx_steps_per_epoch();
  total_steps_ = ts_.max_steps > 0 ? ts_.max_steps : steps_per_epoch * ts_.epochs;
  build_schedule();
  lower_ = lower_dtype(ts_.precision);
  if (ts_.precision == Precision::Fp16) scaler_.emplace(ts_.loss_scaler);
  if (writer_ && lower_) {
    fmt::print("mixed precision: {} ({} GEMM inputs, float32 master weights{})\n", precision_name(ts_.precision),
               dtype_name(*lower_), scaler_ ? fmt::format(", loss scale {:g}", scaler_->scale()) : "");
    std::fflush(stdout);
  }
}

void TrainingRun::build_schedule() {
  // A restarted schedule runs over what is left of the run: its steps and its time budget.
  LoopSettings from_origin = ts_;
  if (ts_.max_minutes > 0) from_origin.max_minutes = std::max(ts_.max_minutes - schedule_origin_s_ / 60, 1e-9);
  const std::int64_t left = total_steps_ - schedule_origin_step_;
  if (ts_.schedule_steps == 0 && schedule_origin_step_ > 0 && left < 1)
    fail(kOp, "the schedule restarts at step {} but the run ends at step {}: raise train.max_steps",
         schedule_origin_step_, total_steps_);
  lr_factor_.emplace(from_origin, ts_.schedule_steps > 0 ? ts_.schedule_steps : left);
}

void TrainingRun::init_from(const std::string& run_or_checkpoint) {
  const std::string file = init_checkpoint_path(run_or_checkpoint);
  const nn::Checkpoint ck = nn::load_checkpoint(file);
  for (const auto& [label, mine] : task_.checkpoint_labels()) {
    const auto it = ck.run.find(label);
    if (it != ck.run.end() && it->second != mine)
      fail(kOp, "--init-from {}: its {} is '{}', this run's is '{}' (the token ids would mean other tokens)", file,
           label, it->second, mine);
  }
  // Shapes are checked before anything is copied (a mismatch names the tensor and both shapes).
  const nn::LoadResult r = model_.load_state_dict(ck.model, /*strict=*/false);
  const std::int64_t loaded = static_cast<std::int64_t>(model_.state_dict().size() - r.missing_keys.size());
  if (loaded == 0)
    fail(kOp,
         "--init-from {}: none of the model's tensors are in the checkpoint (is it a checkpoint of another model?)",
         file);
  if (!writer_) return;
  const auto joined = [](const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); };
  fmt::print("initialised from {}: {} of {} tensors", file, loaded, model_.state_dict().size());
  if (!r.missing_keys.empty()) fmt::print("; not in the checkpoint (kept as initialised): {}", joined(r.missing_keys));
  if (!r.unexpected_keys.empty())
    fmt::print("; in the checkpoint but not the model (unused): {}", joined(r.unexpected_keys));
  fmt::print("\n");
  std::fflush(stdout);
  run_.log_metrics(
      "init_from",
      {{"tensors_loaded", static_cast<double>(loaded)},
       {"tensors_not_found", static_cast<double>(r.missing_keys.size())},
       {"tensors_unused", static_cast<double>(r.unexpected_keys.size())}},
      {{"checkpoint", file}, {"not_found", joined(r.missing_keys)}, {"unused", joined(r.unexpected_keys)}});
}

void TrainingRun::resume_or_start(const StartOptions& start) {
  bool resume = start.resume;
  if (resume && comm_->sum(std::int64_t{std::filesystem::exists(run_.file(kLatest)) ? 1 : 0}) < world_) {
    // Killed before its first checkpoint: nothing was saved, so the run starts again.
    if (writer_) {
      fmt::print("no checkpoint in {} yet: starting the run from the beginning\n", run_.path());
      std::fflush(stdout);
      run_.truncate_metrics(0);
    }
    resume = false;
  }
  if (!resume) {
    if (rank_ > 0) model_gen_.set_state({rank_seed(model_gen_.state().seed, rank_), model_gen_.state().offset});
    if (!start.init_from.empty()) init_from(start.init_from);
    return;
  }
  const nn::Checkpoint ck = nn::load_checkpoint(run_.file(kLatest));
  const std::int64_t saved_world = number_field_or<std::int64_t>(ck, "world_size", 1);
  if (saved_world != world_)
    fail(kOp, "{} was written by a run of {} process(es); resume it with {} (this run has {})", run_.file(kLatest),
         saved_world, saved_world, world_);
  for (const auto& [label, mine] : task_.checkpoint_labels())
    if (const auto it = ck.run.find(label); it != ck.run.end() && it->second != mine)
      fail(kOp, "{}: its {} is '{}', this run's is '{}' (a vocab.txt or subword.model changed since it was saved)",
           run_.file(kLatest), label, it->second, mine);
  // Without the optimizer's state (--reset-optimizer) the optimizer is the fresh one built above.
  nn::restore_checkpoint(ck, model_, start.reset_optimizer ? nullptr : optimizer_.get());
  const std::string gen_key = rank_ == 0 ? "model_generator" : fmt::format("model_generator_rank{}", rank_);
  model_gen_.set_state(parse_state(checkpoint_field(ck, gen_key), gen_key.c_str()));
  task_.restore(ck);
  p_.epoch = number_field<std::int64_t>(ck, "epoch");
  p_.step = number_field<std::int64_t>(ck, "step");
  p_.best_valid = number_field<double>(ck, "best_valid");  // "inf" before any validation
  p_.seconds = number_field<double>(ck, "seconds");
  p_.mid_epoch = checkpoint_field(ck, "mid_epoch") == "1";
  p_.skipped = number_field_or<std::int64_t>(ck, "skipped_steps", 0);
  if (scaler_ && ck.run.count("loss_scaler")) scaler_->restore(checkpoint_field(ck, "loss_scaler"));
  p_.window_loss = number_field_or<double>(ck, "window_loss", 0);
  p_.window_grad_norm = number_field_or<double>(ck, "window_grad_norm", 0);
  p_.window_steps = number_field_or<std::int64_t>(ck, "window_steps", 0);
  p_.window_tokens = number_field_or<std::int64_t>(ck, "window_tokens", 0);
  // Lines logged after this checkpoint (the resumed run logs them again) and a line cut short
  // by a kill go; checkpoints of older versions did not record the size and keep the log.
  if (writer_ && ck.run.count("metrics_bytes")) run_.truncate_metrics(number_field<std::uint64_t>(ck, "metrics_bytes"));
  schedule_origin_step_ = number_field_or<std::int64_t>(ck, "schedule_origin_step", 0);
  schedule_origin_s_ = number_field_or<double>(ck, "schedule_origin_seconds", 0);
  if (start.reset_schedule) {
    schedule_origin_step_ = p_.step;
    schedule_origin_s_ = p_.seconds;
  }
  if (schedule_origin_step_ > 0 || schedule_origin_s_ > 0) build_schedule();
  if (writer_ && (start.reset_optimizer || start.reset_schedule))
    run_.log_metrics("reset", {{"step", static_cast<double>(p_.step)},
                               {"optimizer", start.reset_optimizer ? 1.0 : 0.0},
                               {"schedule", start.reset_schedule ? 1.0 : 0.0}});
  if (writer_) {
    fmt::print("resuming {} at epoch {}, step {}{}{}\n", run_.path(), p_.epoch, p_.step,
               start.reset_optimizer ? ", optimizer state reset" : "",
               start.reset_schedule ? ", learning-rate schedule restarted" : "");
    std::fflush(stdout);  // a log file is block-buffered: this line must survive a later kill
  }
}

// Data parallel: every rank starts from rank 0's weights (a resume loaded the same file, a new
// run initialised with the same seed: the broadcast changes nothing unless something is wrong,
// and the checksum says so), then reduces its gradients each step.
void TrainingRun::start_data_parallel() {
  if (world_ > 1) {
    for (auto& [name, t] : named_) {
      Tensor data = detach(t);
      comm_->broadcast(data, 0);
    }
    comm_->require_equal(parameter_checksum(named_), "the parameters after the broadcast from rank 0");
    reducer_ = std::make_unique<dist::GradientReducer>(
        *comm_, named_, static_cast<std::size_t>(ts_.bucket_mb * 1024 * 1024), ts_.allreduce_dtype);
    if (writer_) {
      fmt::print("data parallel: {} processes ({}), {} gradient buckets of up to {} MB, all-reduced in {}\n", world_,
                 comm_->backend(), reducer_->num_buckets(), ts_.bucket_mb, dtype_name(reducer_->bucket_dtype(0)));
      std::fflush(stdout);
    }
  }
  // fp16: the host decides before each update whether the step overflowed.
  read_every_step_ = ts_.skip_nonfinite || reducer_ != nullptr || scaler_.has_value();
}

void TrainingRun::settle() {
  for (const PendingSteps::Numbers& n : pending_.read(part_norms_)) {
    if (!std::isfinite(n.loss) || !std::isfinite(n.norm))
      fail_nonfinite(nonfinite_reason(n.loss, n.norm, named_), n.epoch, n.step);
    p_.window_loss += n.loss;
    p_.window_grad_norm += n.norm;
  }
}

void TrainingRun::save_latest(std::int64_t resume_epoch) {
  std::map<std::string, std::string> rank_fields;
  if (world_ > 1) {
    const GeneratorState mine = model_gen_.state();
    const Tensor all = comm_->all_gather(from_vector(
        std::vector<std::int64_t>{static_cast<std::int64_t>(mine.seed), static_cast<std::int64_t>(mine.offset)}));
    const std::int64_t* v = all.data<std::int64_t>();
    for (int r = 1; r < world_; ++r)
      rank_fields[fmt::format("model_generator_rank{}", r)] =
          state_string({static_cast<std::uint64_t>(v[2 * r]), static_cast<std::uint64_t>(v[2 * r + 1])});
    comm_->require_equal(parameter_checksum(named_), "the parameters (the ranks have drifted apart)");
  }
  nn::Checkpoint ck = nn::make_checkpoint(model_, optimizer_.get(),
                                          {{"model_generator", state_string(model_gen_.state())},
                                           {"epoch", std::to_string(resume_epoch)},
                                           {"step", std::to_string(p_.step)},
                                           {"best_valid", fmt::format("{:.17g}", p_.best_valid)},
                                           {"seconds", fmt::format("{:.17g}", p_.seconds)},
                                           {"mid_epoch", p_.mid_epoch ? "1" : "0"},
                                           {"skipped_steps", std::to_string(p_.skipped)},
                                           {"window_loss", fmt::format("{:.17g}", p_.window_loss)},
                                           {"window_grad_norm", fmt::format("{:.17g}", p_.window_grad_norm)},
                                           {"window_steps", std::to_string(p_.window_steps)},
                                           {"window_tokens", std::to_string(p_.window_tokens)},
                                           {"metrics_bytes", std::to_string(run_.metrics_size())},
                                           {"schedule_origin_step", std::to_string(schedule_origin_step_)},
                                           {"schedule_origin_seconds", fmt::format("{:.17g}", schedule_origin_s_)}});
  for (auto& [k, v] : task_.checkpoint_labels()) ck.run[k] = v;
  ck.run["precision"] = precision_name(ts_.precision);
  if (scaler_) ck.run["loss_scaler"] = scaler_->state();
  ck.run.insert(rank_fields.begin(), rank_fields.end());
  if (world_ > 1) ck.run["world_size"] = std::to_string(world_);
  task_.save(ck);
  if (writer_) nn::save_checkpoint(run_.file(kLatest), ck);
}

template <typename Save>
void TrainingRun::checkpoint(const char* which, Save&& save) {
  try {
    save();
  } catch (const Error& e) {
    if (ts_.stop_on_checkpoint_error)
      fail(kOp,
           "the {} checkpoint at step {} was not saved, training stopped (train.on_checkpoint_error = "
           "continue keeps training): {}",
           which, p_.step, e.what());
    fmt::print(stderr, "warning: the {} checkpoint at step {} was not saved, training goes on: {}\n", which, p_.step,
               e.what());
    run_.log_metrics("checkpoint_error", {{"step", static_cast<double>(p_.step)}}, {{"error", e.what()}});
  }
}

void TrainingRun::save_weights(const std::string& file) {
  std::map<std::string, std::string> labels = task_.checkpoint_labels();
  labels["epoch"] = std::to_string(p_.epoch);
  labels["step"] = std::to_string(p_.step);
  nn::save_checkpoint(file, nn::make_checkpoint(model_, nullptr, std::move(labels)));
}

double TrainingRun::validate_and_keep_best(bool end_of_budget) {
  double val = writer_ ? task_.validate() : 0.0;
  if (world_ > 1) {
    Tensor v = scalar_tensor(val, {.dtype = DType::Float64});
    comm_->broadcast(v, 0);
    val = v.item_double();
  }
  if (writer_) {
    if (end_of_budget)
      fmt::print("end of budget in epoch {}, after step {} | valid loss {:.4f} | valid ppl {:.2f} | {:.0f} s\n",
                 p_.epoch, p_.step, val, std::exp(val), elapsed());
    else
      fmt::print("epoch {} | valid loss {:.4f} | valid ppl {:.2f} | {:.0f} s\n", p_.epoch, val, std::exp(val),
                 elapsed());
    std::fflush(stdout);  // interleaves correctly with the progress line on stderr when logged
    std::map<std::string, double> fields = {{"epoch", static_cast<double>(p_.epoch)},
                                            {"step", static_cast<double>(p_.step)},
                                            {"loss", val},
                                            {"perplexity", std::exp(val)},
                                            {"elapsed_s", elapsed()}};
    if (end_of_budget) fields["end_of_budget"] = 1;
    run_.log_metrics("valid", fields);
  }
  if (val < p_.best_valid && writer_) {
    p_.best_valid = val;
    checkpoint("best", [&] { save_weights(run_.file(kBest)); });
  }
  if (val < p_.best_valid) p_.best_valid = val;  // the other ranks keep the same record
  return val;
}

TrainResult TrainingRun::train() {
  budget_s_ = ts_.max_minutes > 0 ? ts_.max_minutes * 60 : std::numeric_limits<double>::infinity();
  progress_.emplace();
  window_start_ = Clock::now();
  session_start_seconds_ = p_.seconds;
  session_start_ = Clock::now();
  for (; p_.epoch <= ts_.epochs && !out_of_budget_; ++p_.epoch) {
    if (!train_epoch()) break;
    end_epoch();
  }
  return finish();
}

bool TrainingRun::train_epoch() {
  if (!p_.mid_epoch) task_.start_epoch();
  p_.mid_epoch = true;
  model_.train();
  while (train_step()) {
  }
  settle();  // a non-finite step stops the run before it validates or saves; the window is complete
  progress_->finish();
  if (out_of_budget_) return false;
  p_.mid_epoch = false;
  return true;
}

bool TrainingRun::train_step() {
  // The budget is checked before drawing a batch, so the saved data position is the next batch to
  // train on. Ranks decide together (their clocks differ): rank 0's clock counts, for the budget
  // and for a schedule over time alike.
  double now = elapsed();
  if (world_ > 1 && std::isfinite(budget_s_)) now = comm_->sum(writer_ ? now : 0.0);
  const bool over_time = now >= budget_s_;
  if ((ts_.max_steps > 0 && p_.step >= ts_.max_steps) || over_time) {
    out_of_budget_ = true;
    return false;
  }
  crash_point("train_step");  // tests: a rank that dies mid-run (scripts/checks/check-distributed.sh)
  optimizer_->zero_grad();
  std::optional<TrainingTask::Step> batch;
  // The forward's ops cast as autograd/autocast.h's table says (nothing changes in fp32).
  const autocast::Scope mixed(lower_);
  const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
  if (reducer_) {
    ReducingContext ctx(*reducer_);
    ctx.set_loss_scale(loss_scale);
    batch = task_.train_step(ctx);
    if (batch) {
      // The global batch's mean loss and token count; the gradients are now its mean gradient.
      const std::int64_t tokens = ctx.finish();
      const double loss = batch->loss_tensor.defined() ? batch->loss_tensor.item_double() : batch->loss;
      batch->loss = comm_->sum(loss * static_cast<double>(batch->tokens)) / static_cast<double>(tokens);
      batch->loss_tensor = Tensor();
      batch->tokens = tokens;
    }
  } else {
    TrainingTask::StepContext ctx;
    ctx.set_loss_scale(loss_scale);
    batch = task_.train_step(ctx);
  }
  if (!batch) return false;
  if (gradient_observer()) gradient_observer()(p_.step + 1, named_);
  if (!read_every_step_) {
    // The norm before clipping; the gradients are left as they are when it is not finite.
    const Tensor norm =
        ts_.clip > 0 ? optim::clip_grad_norm_on_device(named_, ts_.clip) : optim::grad_norm_on_device(named_);
    if ((p_.step + 1) % ts_.log_interval == 0)
      for (const auto& [part, members] : parts_)
        pending_.add_part_norm("grad_norm " + part, optim::grad_norm_on_device(members));
    const Tensor loss =
        batch->loss_tensor.defined() ? batch->loss_tensor : scalar_tensor(batch->loss, {.dtype = DType::Float64});
    pending_.add(p_.epoch, p_.step + 1, loss, norm);
  } else if (batch->loss_tensor.defined()) {
    batch->loss = batch->loss_tensor.item_double();
  }
  // As above, read at once. fp16: the gradients are unscaled (and clipped) in one pass.
  const double norm = !read_every_step_ ? 0.0
                      : scaler_         ? optim::unscale_clip_grad_norm(named_, loss_scale, ts_.clip)
                      : ts_.clip > 0    ? optim::clip_grad_norm(named_, ts_.clip, 2.0, optim::NonFinite::Skip)
                                        : optim::grad_norm(named_);
  if (scaler_ && (!std::isfinite(batch->loss) || !std::isfinite(norm))) {
    // An overflow: no update, the scale halves (or the run stops, train/precision.h). Not a
    // skipped step in train.skip_nonfinite's sense: loss scaling expects them.
    const std::string who = optim::first_nonfinite_gradient(named_);
    const std::string what =
        !std::isfinite(batch->loss)
            ? fmt::format("the loss itself was {} (a forward op's output overflowed float16)", batch->loss)
        : who.empty() ? std::string("every gradient is finite but the sum of their squares overflowed")
                      : fmt::format("the first non-finite gradient was '{}'", who);
    scaler_->overflow(p_.epoch, p_.step + 1, what);
    if (writer_)
      run_.log_metrics("overflow",
                       {{"epoch", static_cast<double>(p_.epoch)},
                        {"step", static_cast<double>(p_.step)},
                        {"loss_scale", scaler_->scale()},
                        {"overflows", static_cast<double>(scaler_->overflows())}},
                       {{"reason", what}});
    task_.discard_carried_state();
    return true;
  }
  if (read_every_step_ && (!std::isfinite(batch->loss) || !std::isfinite(norm))) {
    const std::string why = nonfinite_reason(batch->loss, norm, named_);
    if (!ts_.skip_nonfinite) fail_nonfinite(why, p_.epoch, p_.step + 1);
    ++p_.skipped;
    if (++skipped_in_a_row_ >= kMaxSkippedInARow)
      fail(kOp,
           "{} steps in a row had a non-finite loss or gradient (the last at epoch {}, after step {}: {}); "
           "skipping does not help, lower train.lr or check the data",
           skipped_in_a_row_, p_.epoch, p_.step, why);
    if (writer_) fmt::print(stderr, "skipping a step at epoch {}, after step {}: {}\n", p_.epoch, p_.step, why);
    if (writer_)
      run_.log_metrics("skipped",
                       {{"epoch", static_cast<double>(p_.epoch)},
                        {"step", static_cast<double>(p_.step)},
                        {"skipped_steps", static_cast<double>(p_.skipped)}},
                       {{"reason", why}});
    task_.discard_carried_state();
    return true;
  }
  skipped_in_a_row_ = 0;
  if (read_every_step_) {
    if ((p_.step + 1) % ts_.log_interval == 0)
      for (const auto& [part, members] : parts_) part_norms_["grad_norm " + part] = optim::grad_norm(members);
    p_.window_grad_norm += norm;
    p_.window_loss += batch->loss;
  }
  const double scheduled = (*lr_factor_)(p_.step - schedule_origin_step_, now - schedule_origin_s_);
  step_with_factor(*optimizer_, base_lrs_, scheduled * batch->lr_scale);
  ++p_.step;
  if (scaler_) scaler_->clean_step(p_.step);

  ++p_.window_steps;
  p_.window_tokens += batch->tokens;
  if (p_.step % ts_.log_interval == 0) log_window(base_lrs_[0] * scheduled);
  if (ts_.checkpoint_interval > 0 && p_.step % ts_.checkpoint_interval == 0) {
    // The window's sums go into the checkpoint; and a non-finite step must stop the run here,
    // not inside checkpoint(), which may only report a failed save.
    settle();
    p_.seconds = elapsed();
    checkpoint("latest", [&] { save_latest(p_.epoch); });
  }
  if (step_observer()) step_observer()(p_.step);
  return true;
}

void TrainingRun::log_window(double lr) {
  settle();
  const double dt = std::chrono::duration<double>(Clock::now() - window_start_).count();
  const double mean_loss = p_.window_loss / static_cast<double>(p_.window_steps);
  const double tok_s = static_cast<double>(p_.window_tokens) / dt;
  if (writer_) progress_->update(p_.epoch, p_.step, total_steps_, mean_loss, tok_s, lr, elapsed(), budget_s_);
  std::map<std::string, double> metrics = {
      {"epoch", static_cast<double>(p_.epoch)},
      {"step", static_cast<double>(p_.step)},
      {"loss", mean_loss},
      {"perplexity", std::exp(mean_loss)},
      {"tokens_per_s", tok_s},
      {"elapsed_s", elapsed()},  // wall time of the run, earlier sessions of a resumed one included
      {"lr", lr},
      // mean over the window, before clipping; the per-part norms are of this step alone
      {"grad_norm", p_.window_grad_norm / static_cast<double>(p_.window_steps)},
      {"peak_rss_bytes", static_cast<double>(peak_rss_bytes())},
      {"peak_tensor_bytes", static_cast<double>(peak_tensor_bytes())}};
  metrics.insert(part_norms_.begin(), part_norms_.end());
  if (ts_.skip_nonfinite) metrics["skipped_steps"] = static_cast<double>(p_.skipped);
  if (scaler_) {
    metrics["loss_scale"] = scaler_->scale();
    metrics["overflows"] = static_cast<double>(scaler_->overflows());
  }
  if (reducer_) {
    // Communication per step: its span from the first bucket's start to the last one's end, and
    // the part backward did not hide (waited for after it).
    const dist::GradientReducer::Timing c = reducer_->timing();
    const auto n = static_cast<double>(p_.window_steps);
    metrics["comm_ms_per_step"] = 1e3 * c.comm_window_s / n;
    metrics["comm_wait_ms_per_step"] = 1e3 * c.wait_s / n;
    metrics["buckets_started_in_backward"] =
        c.buckets > 0 ? static_cast<double>(c.buckets_started_in_backward) / static_cast<double>(c.buckets) : 0;
    reducer_->reset_timing();
  }
  if (writer_) run_.log_metrics("train", metrics);
  p_.window_loss = p_.window_grad_norm = 0;
  p_.window_steps = p_.window_tokens = 0;
  window_start_ = Clock::now();
}

// End of an epoch: validate (on the averaged weights once NT-ASGD averages), keep the best.
void TrainingRun::end_epoch() {
  std::optional<optim::AveragedWeights> averaged;
  if (ntasgd_ && ntasgd_->averaging()) averaged.emplace(*ntasgd_);
  const double val = validate_and_keep_best(false);
  if (ts_.keep_epoch_checkpoints > 0 && writer_) {
    // The weights after this epoch, for `define average` (the last N averaged, as fairseq's
    // average_checkpoints); the oldest beyond N is removed once the new one is safely written.
    checkpoint("epoch", [&] {
      save_weights(run_.file(epoch_checkpoint_name(p_.epoch)));
      std::error_code ec;
      std::filesystem::remove(run_.file(epoch_checkpoint_name(p_.epoch - ts_.keep_epoch_checkpoints)), ec);
    });
  }
  averaged.reset();
  if (ntasgd_ && !ntasgd_->averaging() && ntasgd_->observe(val) && writer_)
    fmt::print("switching to averaged SGD (no improvement over the last {} evaluations)\n", ts_.nonmono);
  p_.seconds = elapsed();
  checkpoint("latest", [&] { save_latest(p_.epoch + 1); });
}

TrainResult TrainingRun::finish() {
  p_.seconds = elapsed();
  if (p_.mid_epoch) checkpoint("latest", [&] { save_latest(p_.epoch); });
  // A budget (time or steps) that ends inside an epoch: the steps since the last validation count
  // too. Without this a 30-minute run on a corpus whose epoch takes 8 minutes would report the
  // weights of minute 24. It comes after latest.ckpt, so a resumed run continues exactly as an
  // uninterrupted one (its log and record of the best do not hold this validation); best.ckpt
  // and the final numbers do. NT-ASGD's trigger still sees epoch ends only. A resume of a run that
  // had already reached its budget validates the same weights again (and logs the same line in
  // place of the one its resume cut from the log), so a kill between latest.ckpt and this line
  // loses nothing.
  if (out_of_budget_ && p_.mid_epoch) {
    std::optional<optim::AveragedWeights> averaged;
    if (ntasgd_ && ntasgd_->averaging()) averaged.emplace(*ntasgd_);
    validate_and_keep_best(true);
  }

  // Final numbers from the best validated checkpoint; before any epoch completed, from the
  // current weights (averaged ones under NT-ASGD), which latest.ckpt holds. Rank 0 evaluates.
  TrainResult result;
  result.steps = p_.step;
  result.seconds = p_.seconds;
  if (!writer_) return result;
  std::optional<optim::AveragedWeights> averaged;
  if (std::filesystem::exists(run_.file(kBest))) {
    nn::restore_checkpoint(nn::load_checkpoint(run_.file(kBest)), model_, nullptr);
  } else if (ntasgd_ && ntasgd_->averaging()) {
    averaged.emplace(*ntasgd_);
  }
  result.valid_loss = task_.validate();
  result.test_loss = task_.test();
  fmt::print("done: {} steps in {:.0f} s | valid ppl {:.2f} | test ppl {:.2f} | peak memory {:.0f} MiB\n", result.steps,
             result.seconds, std::exp(result.valid_loss), std::exp(result.test_loss),
             static_cast<double>(peak_rss_bytes()) / (1 << 20));
  run_.log_metrics("final", {{"steps", static_cast<double>(result.steps)},
                             {"seconds", result.seconds},
                             {"valid_loss", result.valid_loss},
                             {"valid_perplexity", std::exp(result.valid_loss)},
                             {"test_loss", result.test_loss},
                             {"test_perplexity", std::exp(result.test_loss)},
                             {"peak_rss_bytes", static_cast<double>(peak_rss_bytes())}});
  return result;
}

}  // namespace

TrainResult run_training(TrainingTask& task, const LoopSettings& ts, RunDir& run, const StartOptions& start,
                         Generator& model_gen, dist::Communicator* comm) {
  if (start.resume && !start.init_from.empty())
    fail(kOp, "--init-from starts a new run from another run's weights; it cannot be combined with --resume");
  if (!start.resume && (start.reset_optimizer || start.reset_schedule))
    fail(kOp, "--reset-optimizer and --reset-schedule apply to a resumed run (--resume)");
  TrainingRun training(task, ts, run, model_gen, comm);
  training.resume_or_start(start);
  training.start_data_parallel();
  return training.train();
}

}  // namespace define::train
