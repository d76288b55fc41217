#include "train/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/cpu_allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "data/corpus.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"
#include "models/language_model.h"
#include "models/registry.h"
#include "models/translation_model.h"
#include "train/corpus_location.h"
#include "train/nmt_trainer.h"
#include "train/training_loop.h"

namespace define::train {
namespace {

constexpr const char* kOp = "memory";

}  // namespace

Tensor zipf_tokens(const Shape& shape, std::int64_t vocab, std::int64_t lowest, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double span = static_cast<double>(vocab - lowest);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(numel_of(shape)));
  for (auto& id : ids) {
    // Inverse of the continuous 1/x law on [1, span + 1): x = (span + 1)^u.
    const auto r = static_cast<std::int64_t>(std::pow(span + 1.0, u(rng))) - 1;
    id = lowest + std::clamp<std::int64_t>(r, 0, vocab - lowest - 1);
  }
  return from_vector(ids, shape);
}

namespace {

struct AllocatorProbe {
  Device device;
  void reset() {
    if (device.is_emu())
      define::cuda_emu::allocator(device.index).reset_peak();
    else
      CpuCachingAllocator::instance().reset_peak();
  }
  std::size_t active() const {
    return device.is_emu() ? define::cuda_emu::allocator(device.index).stats().active_bytes
                           : CpuCachingAllocator::instance().stats().active_bytes;
  }
  std::size_t peak() const {
    return device.is_emu() ? define::cuda_emu::allocator(device.index).stats().peak_active_bytes
                           : CpuCachingAllocator::instance().stats().peak_active_bytes;
  }
  std::size_t reserved() const {
    return device.is_emu() ? define::cuda_emu::allocator(device.index).stats().reserved_bytes : 0;
  }
  // Returns the segments an earlier plan left cached, so that reserved bytes are this plan's.
  void release_cache() {
    if (device.is_emu()) define::cuda_emu::allocator(device.index).empty_cache();
  }
};

std::size_t optimizer_state_bytes(const Config& train, std::int64_t params) {
  const std::string name = train.get_string("optimizer", LoopSettings{}.optimizer);
  const auto p = static_cast<std::size_t>(params) * 4;
  if (name == "adam" || name == "adamw") return 2 * p;  // exp_avg, exp_avg_sq
  if (name == "ntasgd") return p;                       // the average, once averaging starts
  if (name == "sgd") return train.get_double("momentum", 0.0) > 0 ? p : 0;
  fail(kOp, "{} '{}': no memory rule for this optimizer", train.path("optimizer"), name);
}

}  // namespace

std::int64_t config_vocab_size(const Config& cfg) {
  const Config model = cfg.section("model");
  if (model.has("vocab_size")) return model.get_int("vocab_size");
  if (!cfg.has("data")) fail(kOp, "the config has neither model.vocab_size nor a data section to find it in");
  const Config data = cfg.section("data");
  // A translation run's vocabulary is the joint subword model it trains.
  if (is_translation_config(cfg)) return read_translation_data_subword_size(data);
  const std::string dir = data.has("dir") ? data.get_string("dir") : find_corpus(data.get_string("corpus", "ptb"));
  return data::Corpus::load(dir).vocab.size();
}

MemoryPlan plan_memory(const Config& cfg, const MemoryPlanOptions& o) {
  if (o.ranks < 1) fail(kOp, "ranks must be positive, got {}", o.ranks);
  if (o.sentence_length < 2) fail(kOp, "the sentence length must be at least 2, got {}", o.sentence_length);
  if (!o.device.is_cpu() && !o.device.is_emu()) fail(kOp, "the step is measured on cpu or emu, not {}", o.device.str());
  if (o.device.is_emu() && kernels::register_devices().emu_devices <= o.device.index)
    fail(kOp, "{} does not exist (CUDA_EMU_DEVICES)", o.device.str());
  if (o.device.is_emu() && !define::cuda_emu::caching_allocator_enabled())
    fail(kOp, "the plan reads the caching allocator's counters, which DEFINE_CUDA_CACHE=0 turns off");
  const Config train = cfg.section("train");
  const Config model_cfg = cfg.section("model");
  const Config data = cfg.section("data");
  MemoryPlan plan;
  plan.update_freq = train.get_int("update_freq", 1);
  if (plan.update_freq < 1) fail(kOp, "{} must be positive, got {}", train.path("update_freq"), plan.update_freq);
  plan.recompute = model_cfg.get_bool("recompute", false);
  plan.optimizer = train.get_string("optimizer", LoopSettings{}.optimizer);

  const std::int64_t vocab = o.vocab > 0 ? o.vocab : config_vocab_size(cfg);
  Generator gen(static_cast<std::uint64_t>(train.get_int("seed", 1)));
  const models::BuiltModel built = models::build_model(model_cfg, vocab, gen);
  plan.model_type = built.type;
  for (const Tensor& p : built.module->parameters()) plan.parameters += p.numel();
  const auto p4 = static_cast<std::size_t>(plan.parameters) * 4;
  plan.weights = p4;
  plan.gradients = p4;
  plan.optimizer_state = optimizer_state_bytes(train, plan.parameters);
  plan.buckets = o.ranks > 1 ? p4 : 0;

  struct DryRun {
    bool on;
    explicit DryRun(bool o) : on(o) {
      if (on) define::cuda_emu::set_dry_run(true);
    }
    ~DryRun() {
      if (on) define::cuda_emu::set_dry_run(false);
    }
  } dry_run(o.device.is_emu() && o.dry_run);
  AllocatorProbe probe{o.device};
  probe.release_cache();
  const std::size_t reserved_before = probe.reserved();
  built.module->to(o.device);
  built.module->train();
  const int passes = plan.update_freq > 1 ? 2 : 1;  // the second pass meets the first one's gradients

  if (is_translation_config(cfg)) {
    auto model = std::dynamic_pointer_cast<models::TranslationModel>(built.module);
    if (!model) fail(kOp, "model.type '{}' is not a translation model", built.type);
    const std::int64_t max_tokens = data.get_int("max_tokens", 4096), L = o.sentence_length;
    const std::int64_t B = std::max<std::int64_t>(1, max_tokens / L);
    plan.pass =
        fmt::format("{} sentences of {} tokens a side ({} tokens, data.max_tokens {})", B, L, B * L, max_tokens);
    const Tensor src = to_device(zipf_tokens({L, B}, model->vocab(), 4, 1), o.device);
    const Tensor tgt = to_device(zipf_tokens({L + 1, B}, model->vocab(), 4, 2), o.device);
    const Tensor tgt_in = contiguous(narrow(tgt, 0, 0, L)), tgt_out = contiguous(narrow(tgt, 0, 1, L));
    const std::size_t before = probe.active();
    probe.reset();
    for (int k = 0; k < passes; ++k) {
      const Tensor loss = model->loss_sum(src, tgt_in, tgt_out, 0.1);
      backward(mul(loss, 1.0 / static_cast<double>(B * L)));
    }
    plan.step = probe.peak() - before;
  } else {
    auto model = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
    if (!model) fail(kOp, "model.type '{}' is neither a language nor a translation model", built.type);
    const std::int64_t batch = data.get_int("batch_size", 20), T = data.get_int("bptt", 70);
    if (batch % o.ranks != 0 || (batch / o.ranks) % plan.update_freq != 0)
      fail(kOp, "data.batch_size {} does not split into {} rank(s) x train.update_freq {}", batch, o.ranks,
           plan.update_freq);
    const std::int64_t B = batch / o.ranks / plan.update_freq;
    plan.pass =
        fmt::format("[{}, {}] tokens ({} streams a rank in {} chunk(s))", T, B, batch / o.ranks, plan.update_freq);
    const Tensor tokens = to_device(zipf_tokens({T + 1, B}, vocab, 0, 1), o.device);
    const Tensor x = contiguous(narrow(tokens, 0, 0, T)), y = contiguous(narrow(tokens, 0, 1, T));
    models::LmState state;
    {
      // The state a window meets in training: the previous window's (Transformer-XL's full memory).
      NoGradGuard no_grad;
      state = models::detach(model->forward(x, y, {}).state);
    }
    const std::size_t before = probe.active();
    probe.reset();
    for (int k = 0; k < passes; ++k) {
      auto out = model->forward(x, y, state);
      backward(mul(out.objective, 1.0 / static_cast<double>(plan.update_freq)));
    }
    plan.step = probe.peak() - before;
  }
  plan.reserved = probe.reserved() - reserved_before;
  return plan;
}

std::size_t predicted_device_bytes(const MemoryPlan& plan) {
  // The optimizer state and the buckets are allocated at the first step, in segments of their own
  // size or larger: counted as they are, on top of what the step reserved.
  const std::size_t held = plan.reserved ? plan.reserved : plan.weights + plan.step;
  return held + plan.optimizer_state + plan.buckets + kContextAllowance;
}

}  // namespace define::train
