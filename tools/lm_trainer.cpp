#include "tools/lm_trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "kernels/devices.h"
#include "models/lstm_lm.h"
#include "models/registry.h"
#include "nn/checkpoint.h"
#include "nn/optim/optim.h"
#include "tools/corpus_location.h"
#include "tools/run_log.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "train";
constexpr const char* kLatest = "latest.ckpt";
constexpr const char* kBest = "best.ckpt";

struct DataSettings {
  std::string corpus_dir;
  std::int64_t batch_size, eval_batch_size, test_batch_size, bptt;
  bool variable_length;
};

struct TrainSettings {
  std::string optimizer;
  Device device;
  double lr, weight_decay, momentum, clip, max_minutes, alpha, beta;
  double unit_lr_scale;  // the token-representation unit's lr as a multiple of lr
  std::int64_t epochs, max_steps, nonmono, log_interval, checkpoint_interval, seed, threads;
};

// "cpu", "cuda[:N]" or "emu" (the emulated GPU, slow: for checking the GPU path without one).
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
  if (d.is_cuda() && d.index >= a.cuda_devices)
    fail(kOp, "{} = '{}': {}", key, name,
         kernels::built_with_cuda() ? fmt::format("{} GPU(s) found", a.cuda_devices)
                                    : std::string("this build has no CUDA backend (configure with DEFINE_CUDA=ON)"));
  return d;
}

void require_positive(const Config& c, const char* key, std::int64_t v) {
  if (v < 1) fail(kOp, "{} must be positive, got {}", c.path(key), v);
}

DataSettings read_data(const Config& c) {
  DataSettings d;
  d.corpus_dir = c.has("dir") ? c.get_string("dir") : find_corpus(c.get_string("corpus", "ptb"));
  d.batch_size = c.get_int("batch_size", 20);
  d.eval_batch_size = c.get_int("eval_batch_size", 10);
  d.test_batch_size = c.get_int("test_batch_size", 1);
  d.bptt = c.get_int("bptt", 70);
  d.variable_length = c.get_bool("variable_length", true);
  require_positive(c, "batch_size", d.batch_size);
  require_positive(c, "eval_batch_size", d.eval_batch_size);
  require_positive(c, "test_batch_size", d.test_batch_size);
  require_positive(c, "bptt", d.bptt);
  return d;
}

TrainSettings read_train(const Config& c) {
  TrainSettings t;
  t.optimizer = c.get_string("optimizer", "ntasgd");
  t.device = training_device(c.get_string("device", "cpu"), c.path("device"));
  t.lr = c.get_double("lr", 30.0);
  t.weight_decay = c.get_double("weight_decay", 1.2e-6);
  t.momentum = c.get_double("momentum", 0.0);
  t.unit_lr_scale = c.get_double("unit_lr_scale", 1.0);
  t.clip = c.get_double("clip", 0.25);
  t.epochs = c.get_int("epochs", 1);
  t.max_minutes = c.get_double("max_minutes", 0.0);
  t.max_steps = c.get_int("max_steps", 0);
  t.alpha = c.get_double("alpha", 2.0);
  t.beta = c.get_double("beta", 1.0);
  t.nonmono = c.get_int("nonmono", 5);
  t.log_interval = c.get_int("log_interval", 50);
  t.checkpoint_interval = c.get_int("checkpoint_interval", 0);
  t.seed = c.get_int("seed", 1111);
  t.threads = c.get_int("threads", 2);
  require_positive(c, "epochs", t.epochs);
  require_positive(c, "log_interval", t.log_interval);
  require_positive(c, "threads", t.threads);
  if (!(t.lr > 0)) fail(kOp, "{} must be positive, got {}", c.path("lr"), t.lr);
  if (!(t.unit_lr_scale > 0))
    fail(kOp, "{} must be positive, got {}", c.path("unit_lr_scale"), t.unit_lr_scale);
  return t;
}

// One parameter group, or two when train.unit_lr_scale != 1: the token-representation unit
// (part "DeFINE") at lr * scale, everything else at lr. Group lrs keep that ratio through the
// trainer's per-batch scaling (see scaled_step).
// `all`: the model's parameters; `parts`: the same grouped by part (models::group_by_part).
std::vector<optim::GroupSpec> parameter_groups(
    const TrainSettings& t, const optim::NamedParameters& all,
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

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainSettings& t, std::vector<optim::GroupSpec> params) {
  if (t.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = t.lr, .momentum = t.momentum, .weight_decay = t.weight_decay});
  if (t.optimizer == "ntasgd")
    return std::make_unique<optim::NTASGD>(params, optim::NTASGDOptions{.lr = t.lr, .weight_decay = t.weight_decay, .nonmono = t.nonmono});
  if (t.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = t.lr, .weight_decay = t.weight_decay});
  if (t.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = t.lr, .weight_decay = t.weight_decay});
  fail(kOp, "unknown train.optimizer '{}' (expected sgd, adam, adamw or ntasgd)", t.optimizer);
}

// One step with every group's lr times `scale`: longer windows take proportionally larger steps
// (AWD-LSTM).
void scaled_step(optim::Optimizer& optimizer, double scale) {
  std::vector<double> lrs;
  for (std::size_t g = 0; g < optimizer.num_groups(); ++g) {
    lrs.push_back(optimizer.lr(g));
    optimizer.set_lr(g, lrs.back() * scale);
  }
  optimizer.step();
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer.set_lr(g, lrs[g]);
}

}  // namespace

double evaluate_lm(models::LstmLM& model, const Tensor& batches, std::int64_t bptt) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  nn::LSTMState state;
  double total = 0;
  std::int64_t tokens = 0;
  const std::int64_t T = batches.shape()[0], B = batches.shape()[1];
  for (std::int64_t i = 0; i + 1 < T; i += bptt) {
    const std::int64_t len = std::min(bptt, T - 1 - i);
    const Tensor x = contiguous(narrow(batches, 0, i, len));
    const Tensor y = contiguous(narrow(batches, 0, i + 1, len));
    auto out = model.forward(x, y, state);
    state = std::move(out.state);
    total += out.loss.item_double() * static_cast<double>(len * B);
    tokens += len * B;
  }
  model.train(was_training);
  if (tokens == 0) fail(kOp, "evaluation split is too short for batch size {}", B);
  return total / static_cast<double>(tokens);
}

namespace {

// AR: alpha * mean(h^2) of the dropped last-layer output; TAR: beta * mean((h_t - h_{t-1})^2) of
// the raw one (Merity et al. 2018, section 4.6).
Tensor regularised(const models::LstmLM::Output& out, double alpha, double beta) {
  Tensor loss = out.loss;
  if (alpha > 0) loss = add(loss, mul(mean(mul(out.output, out.output)), alpha));
  const std::int64_t T = out.raw_output.shape()[0];
  if (beta > 0 && T > 1) {
    const Tensor d = sub(narrow(out.raw_output, 0, 1, T - 1), narrow(out.raw_output, 0, 0, T - 1));
    loss = add(loss, mul(mean(mul(d, d)), beta));
  }
  return loss;
}

std::string state_string(const GeneratorState& s) { return fmt::format("{} {}", s.seed, s.offset); }
GeneratorState parse_state(const std::string& s, const char* what) {
  GeneratorState g;
  if (std::sscanf(s.c_str(), "%lu %lu", &g.seed, &g.offset) != 2) fail(kOp, "checkpoint field {} is malformed: '{}'", what, s);
  return g;
}

// Everything of a run that is not model or optimizer: saved into and restored from checkpoints.
struct Progress {
  std::int64_t epoch = 1;
  std::int64_t step = 0;
  double best_valid = std::numeric_limits<double>::infinity();
  double seconds = 0;
  bool mid_epoch = false;  // the data position is inside `epoch`
};

const std::string& run_field(const nn::Checkpoint& ck, const std::string& key) {
  const auto it = ck.run.find(key);
  if (it == ck.run.end()) fail(kOp, "checkpoint lacks the run field '{}' (not written by define train?)", key);
  return it->second;
}

}  // namespace

TrainResult train_language_model(Config& cfg, const std::string& run_dir, bool resume) {
  const DataSettings ds = read_data(cfg.section("data"));
  const TrainSettings ts = read_train(cfg.section("train"));
  omp_set_num_threads(static_cast<int>(ts.threads));

  const data::Corpus corpus = data::Corpus::load(ds.corpus_dir);
  Generator model_gen(static_cast<std::uint64_t>(ts.seed));
  models::BuiltModel built = models::build_model(cfg.section("model"), corpus.vocab.size(), model_gen);
  auto model = std::dynamic_pointer_cast<models::LstmLM>(built.module);
  if (!model) fail(kOp, "model.type '{}' is not a language model this trainer runs (lstm_lm)", built.type);
  model->set_generator(model_gen);
  cfg.require_all_used();
  model->to(ts.device);  // before the optimizer takes the parameters

  RunDir run(run_dir, resume);
  if (!resume) {
    run.write_config(cfg.resolved());
    corpus.vocab.save(run.file("vocab.txt"));
  }
  const auto params = model->named_parameters();
  // Gradient norms per part (DeFINE unit, context model, input-output) go into the metrics log:
  // what shows one part's gradients swamping the shared clip. The unit's own lr uses the same split.
  const optim::NamedParameters named = optim::to_named_parameters(params);
  const auto parts = models::group_by_part(named, built.parts);
  auto optimizer = make_optimizer(ts, parameter_groups(ts, named, parts));
  auto* ntasgd = dynamic_cast<optim::NTASGD*>(optimizer.get());

  const Tensor train = data::batchify(corpus.train, ds.batch_size);
  // Evaluation slices its batches from these, so they live on the device; training batches are
  // cut on the host by the iterator and copied one at a time.
  const Tensor valid = to_device(data::batchify(corpus.valid, ds.eval_batch_size), ts.device);
  const Tensor test = to_device(data::batchify(corpus.test, ds.test_batch_size), ts.device);
  data::BpttIterator batches(train, {.bptt = ds.bptt, .variable_length = ds.variable_length,
                                     .seed = static_cast<std::uint64_t>(ts.seed)});

  Progress p;
  nn::LSTMState state;
  if (resume) {
    const nn::Checkpoint ck = nn::load_checkpoint(run.file(kLatest));
    nn::restore_checkpoint(ck, *model, optimizer.get());
    model_gen.set_state(parse_state(run_field(ck, "model_generator"), "model_generator"));
    batches.restore(run_field(ck, "data_position"));
    p.epoch = std::stoll(run_field(ck, "epoch"));
    p.step = std::stoll(run_field(ck, "step"));
    p.best_valid = std::stod(run_field(ck, "best_valid"));
    p.seconds = std::stod(run_field(ck, "seconds"));
    p.mid_epoch = run_field(ck, "mid_epoch") == "1";
    for (std::int64_t k = 0;; ++k) {
      const auto h = ck.run_tensors.find(fmt::format("h{}", k)), c = ck.run_tensors.find(fmt::format("c{}", k));
      if (h == ck.run_tensors.end() || c == ck.run_tensors.end()) break;
      state.h.push_back(to_device(h->second, ts.device));
      state.c.push_back(to_device(c->second, ts.device));
    }
    fmt::print("resuming {} at epoch {}, step {}\n", run_dir, p.epoch, p.step);
  }

  // `resume_epoch`: the epoch a resumed run starts in (the next one once an epoch has ended).
  auto save_latest = [&](std::int64_t resume_epoch) {
    nn::Checkpoint ck = nn::make_checkpoint(*model, optimizer.get(),
                                            {{"model_generator", state_string(model_gen.state())},
                                             {"data_position", data::to_string(batches.position())},
                                             {"epoch", std::to_string(resume_epoch)},
                                             {"step", std::to_string(p.step)},
                                             {"best_valid", fmt::format("{:.17g}", p.best_valid)},
                                             {"seconds", fmt::format("{:.17g}", p.seconds)},
                                             {"mid_epoch", p.mid_epoch ? "1" : "0"}});
    for (std::size_t k = 0; k < state.h.size(); ++k) {
      ck.run_tensors[fmt::format("h{}", k)] = state.h[k];
      ck.run_tensors[fmt::format("c{}", k)] = state.c[k];
    }
    nn::save_checkpoint(run.file(kLatest), ck);
  };

  std::map<std::string, double> part_norms;
  const double budget_s = ts.max_minutes > 0 ? ts.max_minutes * 60 : std::numeric_limits<double>::infinity();
  const std::int64_t steps_per_epoch = batches.approx_steps_per_epoch();
  const std::int64_t total_steps = ts.max_steps > 0 ? ts.max_steps : steps_per_epoch * ts.epochs;
  ProgressLine progress;
  bool out_of_budget = false;
  double window_loss = 0, window_grad_norm = 0;
  std::int64_t window_steps = 0, window_tokens = 0;
  auto window_start = std::chrono::steady_clock::now();
  const double session_start_seconds = p.seconds;
  const auto session_start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return session_start_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start).count();
  };

  for (; p.epoch <= ts.epochs && !out_of_budget; ++p.epoch) {
    if (!p.mid_epoch) {
      batches.start_epoch();
      state = {};
    }
    p.mid_epoch = true;
    model->train();
    for (;;) {
      // The budget is checked before drawing a batch, so the saved data position is the next
      // batch to train on.
      if ((ts.max_steps > 0 && p.step >= ts.max_steps) || elapsed() >= budget_s) {
        out_of_budget = true;
        break;
      }
      const std::optional<data::Batch> batch = batches.next();
      if (!batch) break;
      optimizer->zero_grad();
      auto out = model->forward(to_device(batch->input, ts.device), to_device(batch->target, ts.device),
                                nn::detach(state));
      const double loss_value = out.loss.item_double();
      if (!std::isfinite(loss_value))
        fail(kOp, "the training loss became {} at epoch {}, step {} (lower train.lr or check the data)", loss_value,
             p.epoch, p.step + 1);
      backward(regularised(out, ts.alpha, ts.beta));
      state = std::move(out.state);
      if ((p.step + 1) % ts.log_interval == 0)
        for (const auto& [part, members] : parts) part_norms["grad_norm " + part] = optim::grad_norm(members);
      window_grad_norm += ts.clip > 0 ? optim::clip_grad_norm(params, ts.clip) : optim::grad_norm(params);
      scaled_step(*optimizer, batch->lr_scale);
      const double lr = optimizer->lr();
      ++p.step;

      const std::int64_t tokens = batch->input.numel();
      window_loss += loss_value;
      ++window_steps;
      window_tokens += tokens;
      if (p.step % ts.log_interval == 0) {
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        const double mean_loss = window_loss / static_cast<double>(window_steps);
        const double tok_s = static_cast<double>(window_tokens) / dt;
        progress.update(p.epoch, p.step, total_steps, mean_loss, tok_s, lr, elapsed(), budget_s);
        std::map<std::string, double> metrics = {
            {"epoch", static_cast<double>(p.epoch)}, {"step", static_cast<double>(p.step)},
            {"loss", mean_loss}, {"perplexity", std::exp(mean_loss)}, {"tokens_per_s", tok_s}, {"lr", lr},
            // mean over the window, before clipping; the per-part norms are of this step alone
            {"grad_norm", window_grad_norm / static_cast<double>(window_steps)},
            {"peak_rss_bytes", static_cast<double>(peak_rss_bytes())},
            {"peak_tensor_bytes", static_cast<double>(peak_tensor_bytes())}};
        metrics.insert(part_norms.begin(), part_norms.end());
        run.log_metrics("train", metrics);
        window_loss = window_grad_norm = 0;
        window_steps = window_tokens = 0;
        window_start = std::chrono::steady_clock::now();
      }
      if (ts.checkpoint_interval > 0 && p.step % ts.checkpoint_interval == 0) {
        p.seconds = elapsed();
        save_latest(p.epoch);
      }
    }
    progress.finish();
    if (out_of_budget) break;
    p.mid_epoch = false;

    // End of an epoch: validate (on the averaged weights once NT-ASGD averages), keep the best.
    std::optional<optim::AveragedWeights> averaged;
    if (ntasgd && ntasgd->averaging()) averaged.emplace(*ntasgd);
    const double val = evaluate_lm(*model, valid, ds.bptt);
    fmt::print("epoch {} | valid loss {:.4f} | valid ppl {:.2f} | {:.0f} s\n", p.epoch, val, std::exp(val), elapsed());
    std::fflush(stdout);  // interleaves correctly with the progress line on stderr when logged
    run.log_metrics("valid", {{"epoch", static_cast<double>(p.epoch)}, {"step", static_cast<double>(p.step)},
                              {"loss", val}, {"perplexity", std::exp(val)}});
    if (val < p.best_valid) {
      p.best_valid = val;
      nn::save_checkpoint(run.file(kBest), nn::make_checkpoint(*model, nullptr, {{"epoch", std::to_string(p.epoch)}}));
    }
    averaged.reset();
    if (ntasgd && !ntasgd->averaging() && ntasgd->observe(val))
      fmt::print("switching to averaged SGD (no improvement over the last {} evaluations)\n", ts.nonmono);
    p.seconds = elapsed();
    save_latest(p.epoch + 1);
  }
  p.seconds = elapsed();
  if (p.mid_epoch) save_latest(p.epoch);

  // Final numbers from the best validated checkpoint; before any epoch completed, from the
  // current weights (averaged ones under NT-ASGD), which latest.ckpt holds.
  TrainResult result;
  result.steps = p.step;
  result.seconds = p.seconds;
  std::optional<optim::AveragedWeights> averaged;
  if (std::filesystem::exists(run.file(kBest))) {
    nn::restore_checkpoint(nn::load_checkpoint(run.file(kBest)), *model, nullptr);
  } else if (ntasgd && ntasgd->averaging()) {
    averaged.emplace(*ntasgd);
  }
  result.valid_loss = evaluate_lm(*model, valid, ds.bptt);
  result.test_loss = evaluate_lm(*model, test, ds.bptt);
  fmt::print("done: {} steps in {:.0f} s | valid ppl {:.2f} | test ppl {:.2f} | peak memory {:.0f} MiB\n", result.steps,
             result.seconds, std::exp(result.valid_loss), std::exp(result.test_loss),
             static_cast<double>(peak_rss_bytes()) / (1 << 20));
  run.log_metrics("final", {{"steps", static_cast<double>(result.steps)}, {"seconds", result.seconds},
                            {"valid_loss", result.valid_loss}, {"valid_perplexity", std::exp(result.valid_loss)},
                            {"test_loss", result.test_loss}, {"test_perplexity", std::exp(result.test_loss)},
                            {"peak_rss_bytes", static_cast<double>(peak_rss_bytes())}});
  return result;
}

}  // namespace define::cli
