#include "train/nmt_trainer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/parallel.h"
#include "data/parallel_cache.h"
#include "data/subword.h"
#include "data/token_batches.h"
#include "distributed/communicator.h"
#include "models/registry.h"
#include "models/translation_model.h"
#include "train/corpus_location.h"
#include "train/nmt_data.h"
#include "train/run_log.h"

namespace define::train {
namespace {

constexpr const char* kOp = "train";

void require_positive(const Config& c, const char* key, std::int64_t v) {
  if (v < 1) fail(kOp, "{} must be positive, got {}", c.path(key), v);
}

}  // namespace

TranslationDataSettings read_translation_data(const Config& c) {
  TranslationDataSettings d;
  d.source = c.get_string("source", d.source);
  d.target = c.get_string("target", d.target);
  if (d.source == d.target) fail(kOp, "{} and {} are both '{}'", c.path("source"), c.path("target"), d.source);
  d.train = c.get_string("train", d.train);
  d.valid = c.get_string("valid", d.valid);
  d.test = c.get_string("test", d.test);
  const bool tokenized = c.get_bool("tokenized", false);
  if (c.has("dir") && c.has("corpus"))
    fail(kOp, "{} and {} both say where the corpus is; keep one (a --set of either replaces the other)", c.path("dir"),
         c.path("corpus"));
  if (c.has("dir")) {
    d.dir = c.get_string("dir");
    if (tokenized)
      fail(kOp, "{} is for the multi30k corpus; with {} point at the files you want", c.path("tokenized"),
           c.path("dir"));
  } else {
    const std::string corpus = c.get_string("corpus", "multi30k");
    d.dir = find_corpus(corpus, {d.train + "." + d.source, d.train + "." + d.target});
    if (tokenized) d.dir /= "tok";
  }
  d.max_len = c.get_int("max_len", d.max_len);
  d.max_tokens = c.get_int("max_tokens", d.max_tokens);
  d.eval_max_tokens = c.get_int("eval_max_tokens", d.max_tokens);
  require_positive(c, "max_len", d.max_len);
  require_positive(c, "max_tokens", d.max_tokens);
  require_positive(c, "eval_max_tokens", d.eval_max_tokens);
  const Config sw = c.section("subword");
  d.subword.model_type = sw.get_string("type", d.subword.model_type);
  d.subword.vocab_size = read_translation_data_subword_size(c);
  d.subword.character_coverage = sw.get_double("character_coverage", d.subword.character_coverage);
  return d;
}

namespace {

// Per-token sums of one batch: the label-smoothed objective (with graph) and the plain NLL.
struct BatchLoss {
  Tensor objective_sum;
  double nll_sum = 0;
};

BatchLoss batch_loss(const models::TranslationModel& model, const data::TranslationBatch& b, Device device,
                     double label_smoothing, bool with_graph) {
  const Tensor src = to_device(b.src, device), tgt_in = to_device(b.tgt_in, device);
  const Tensor tgt_out = to_device(b.tgt_out, device);
  BatchLoss out;
  Tensor nll_sum;
  if (with_graph) {
    out.objective_sum = model.loss_sum(src, tgt_in, tgt_out, label_smoothing, &nll_sum);
  } else {
    NoGradGuard no_grad;
    nll_sum = model.loss_sum(src, tgt_in, tgt_out, 0.0);
  }
  out.nll_sum = nll_sum.item_double();
  return out;
}

// A translation model on token-count batches of parallel text.
class TranslationTask : public TrainingTask {
 public:
  TranslationTask(std::shared_ptr<models::TranslationModel> model, models::PartRules parts,
                  std::string subword_fingerprint, const data::ParallelData& train, data::ParallelData valid,
                  data::ParallelData test, const TranslationDataSettings& ds, Device device, std::uint64_t seed,
                  double label_smoothing, std::int64_t update_freq, const dist::Communicator& comm)
      : model_(std::move(model)),
        parts_(std::move(parts)),
        subword_fingerprint_(std::move(subword_fingerprint)),
        valid_(std::move(valid)),
        test_(std::move(test)),
        ds_(ds),
        device_(device),
        label_smoothing_(label_smoothing),
        update_freq_(update_freq),
        batches_(train, ds.max_tokens, /*shuffle=*/true, seed) {
    // Data parallel: rank r takes batches r, r + N, ... of each epoch's shared order; every rank
    // stops after the same number (the few batches beyond a multiple of N wait for the next epoch's
    // order), so no rank waits in a reduction for one that has run out.
    const int world = comm.world_size();
    batches_.shard(comm.rank(), world);
    per_rank_ = static_cast<std::int64_t>(batches_.layout().size()) / world;
    if (per_rank_ == 0)
      fail(kOp, "the training data makes {} batch(es) of data.max_tokens {}: too few for {} processes",
           batches_.layout().size(), ds.max_tokens, world);
  }

  nn::Module& model() override { return *model_; }
  const models::PartRules& parts() const override { return parts_; }
  std::int64_t approx_steps_per_epoch() const override { return (per_rank_ + update_freq_ - 1) / update_freq_; }

  void start_epoch() override { batches_.start_epoch(++epoch_); }

  std::optional<Step> train_step(StepContext& ctx) override {
    std::vector<data::TranslationBatch> group;
    for (std::int64_t i = 0; i < update_freq_ && batches_.position() < per_rank_; ++i) {
      std::optional<data::TranslationBatch> b = batches_.next();
      if (!b) break;
      group.push_back(std::move(*b));
    }
    if (group.empty()) return std::nullopt;
    std::int64_t tokens = 0;
    for (const auto& b : group) tokens += b.tgt_tokens;
    // Gradients summed over the group's batches, normalised by all their target tokens: the
    // same step as one batch holding them all.
    ctx.batches_drawn(tokens);
    double nll = 0;
    for (const auto& b : group) {
      BatchLoss l = batch_loss(*model_, b, device_, label_smoothing_, /*with_graph=*/true);
      const Tensor objective = mul(l.objective_sum, 1.0 / static_cast<double>(tokens));
      // fp16's loss scale (1 otherwise): the loop unscales the gradients.
      const Tensor scaled = ctx.loss_scale() == 1.0 ? objective : mul(objective, ctx.loss_scale());
      if (&b == &group.back()) ctx.last_backward(scaled);
      backward(scaled);
      nll += l.nll_sum;
    }
    return Step{.loss = nll / static_cast<double>(tokens), .tokens = tokens, .lr_scale = 1.0};
  }

  void discard_carried_state() override {}  // nothing is carried from batch to batch
  std::map<std::string, std::string> checkpoint_labels() const override { return {{"subword", subword_fingerprint_}}; }

  double validate() override { return evaluate(valid_); }
  double test() override { return evaluate(test_); }

  void save(nn::Checkpoint& ck) const override {
    ck.run["data_position"] = fmt::format("{} {}", epoch_, batches_.position());
    ck.run["batches"] = batches_.fingerprint();
  }
  void restore(const nn::Checkpoint& ck) override {
    // The position means something only for the same batches (data, subwords, max_tokens).
    if (const std::string& b = checkpoint_field(ck, "batches"); b != batches_.fingerprint())
      fail(kOp,
           "the checkpoint's batches ({}) are not this run's ({}): the data, the subword model or "
           "data.max_tokens changed since it was written",
           b, batches_.fingerprint());
    const std::string& pos = checkpoint_field(ck, "data_position");
    long long epoch = 0, index = 0;
    char extra = 0;
    if (std::sscanf(pos.c_str(), "%lld %lld %c", &epoch, &index, &extra) != 2 || epoch < 0 || index < 0)
      fail(kOp, "checkpoint field data_position = '{}' is not '<epoch> <batch>'", pos);
    epoch_ = epoch;
    batches_.set_position(epoch_, index);
  }

 private:
  double evaluate(const data::ParallelData& split) {
    NoGradGuard no_grad;
    const bool was_training = model_->is_training();
    model_->eval();
    data::TokenBatcher batches(split, ds_.eval_max_tokens, /*shuffle=*/false, 0);
    batches.start_epoch(0);
    double nll = 0;
    std::int64_t tokens = 0;
    while (std::optional<data::TranslationBatch> b = batches.next()) {
      nll += batch_loss(*model_, *b, device_, 0.0, /*with_graph=*/false).nll_sum;
      tokens += b->tgt_tokens;
    }
    model_->train(was_training);
    if (tokens == 0) fail(kOp, "an evaluation split has no sentence pairs left");
    return nll / static_cast<double>(tokens);
  }

  std::shared_ptr<models::TranslationModel> model_;
  models::PartRules parts_;
  std::string subword_fingerprint_;
  data::ParallelData valid_, test_;
  TranslationDataSettings ds_;
  Device device_;
  double label_smoothing_;
  std::int64_t update_freq_;
  data::TokenBatcher batches_;
  std::int64_t per_rank_ = 0;  // batches each rank trains on per epoch
  std::int64_t epoch_ = 0;     // epochs started
};

void report_skipped(const char* split, const data::ParallelData& d, std::int64_t max_len) {
  fmt::print("{}: {} sentence pairs", split, d.src.size());
  if (d.skipped_too_long + d.skipped_empty > 0)
    fmt::print(" ({} skipped: {} with a side longer than {} subwords, {} with an empty side)",
               d.skipped_too_long + d.skipped_empty, d.skipped_too_long, max_len, d.skipped_empty);
  fmt::print("\n");
  std::fflush(stdout);  // before the progress line on stderr
}

}  // namespace

std::int64_t read_translation_data_subword_size(const Config& data) {
  return data.section("subword").get_int("vocab_size", data::SubwordOptions{}.vocab_size);
}

bool is_translation_config(const Config& cfg) {
  if (!cfg.has("model") || !cfg.section("model").has("type")) return false;
  const std::string type = cfg.section("model").get_string("type");
  return type == "transformer_nmt" || type == "delight_nmt";
}

TrainResult train_translation_model(Config& cfg, const std::string& run_dir, const StartOptions& start) {
  const TranslationDataSettings ds = read_translation_data(cfg.section("data"));
  const Config train_cfg = cfg.section("train");
  const LoopSettings ts = read_loop_settings(train_cfg);
  const double label_smoothing = train_cfg.get_double("label_smoothing", 0.1);
  if (!(label_smoothing >= 0.0 && label_smoothing < 1.0))
    fail(kOp, "{} must be in [0, 1), got {}", train_cfg.path("label_smoothing"), label_smoothing);
  const std::int64_t update_freq = train_cfg.get_int("update_freq", 1);
  require_positive(train_cfg, "update_freq", update_freq);

  {
    // Every key checked before the subword model is trained and the data read: the model built
    // once from the configured subword vocabulary size, then dropped.
    Generator gen(1);
    const models::BuiltModel dry = models::build_model(cfg.section("model"), ds.subword.vocab_size, gen);
    if (!std::dynamic_pointer_cast<models::TranslationModel>(dry.module))
      fail(kOp, "model.type '{}' is not a translation model", dry.type);
    cfg.require_all_used();
  }

  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator(ts.distributed, ts.device);
  const bool writer = comm->rank() == 0;
  RunDir run(run_dir, start.resume, writer);
  // The subword model: trained once per run, on the training split's two sides (by rank 0; the
  // other ranks of a data-parallel run load what it wrote).
  const std::filesystem::path sw_path = subword_model_path(run.path());
  // A run started --init-from another takes that run's subword model: its ids are what the weights know.
  auto make_subword = [&] {
    if (!start.init_from.empty()) {
      static_cast<void>(init_checkpoint_path(start.init_from));  // a wrong path is reported as such first
      const std::filesystem::path theirs = subword_model_path(init_folder(start.init_from));
      if (!std::filesystem::exists(theirs))
        fail(kOp, "--init-from {}: no subword.model in {} (the subword model its weights were trained with)",
             start.init_from, init_folder(start.init_from));
      data::Subword sw = data::Subword::load(theirs);
      std::filesystem::copy_file(theirs, sw_path, std::filesystem::copy_options::overwrite_existing);
      return sw;
    }
    return start.resume && std::filesystem::exists(sw_path)
               ? data::Subword::load(sw_path)
               : data::Subword::train({ds.file(ds.train, ds.source), ds.file(ds.train, ds.target)}, ds.subword,
                                      std::filesystem::path(run.path()) / "subword");
  };
  std::optional<data::Subword> sw_built;
  if (writer) sw_built.emplace(make_subword());
  comm->barrier();
  if (!writer) sw_built.emplace(data::Subword::load(sw_path));
  const data::Subword& sw = *sw_built;
  // Each split's subword ids through a cache (beside the data when its folder is writable, else in
  // the run folder), so a corpus of WMT'14's size is encoded once.
  const auto load_split = [&](const std::string& split, std::int64_t max_len) {
    std::filesystem::path cache;
    if (ds.cache) {
      const std::string fp = sw.fingerprint();
      const std::string name =
          fmt::format("parallel-{}.{}-{}-{}-max{}.ids", split, ds.source, ds.target, fp.substr(fp.size() - 8), max_len);
      cache = ::access(ds.dir.c_str(), W_OK) == 0 ? ds.dir / ".define-cache" / name
                                                  : std::filesystem::path(run.path()) / name;
    }
    return data::load_parallel_cached(ds.file(split, ds.source), ds.file(split, ds.target), sw, max_len, cache).data;
  };
  const data::ParallelData train = load_split(ds.train, ds.max_len);
  // Evaluation keeps every pair (no length limit): its loss covers the whole split.
  data::ParallelData valid = load_split(ds.valid, 0);
  data::ParallelData test = load_split(ds.test, 0);
  if (writer) report_skipped("train", train, ds.max_len);

  Generator model_gen(static_cast<std::uint64_t>(ts.seed));
  models::BuiltModel built = models::build_model(cfg.section("model"), sw.size(), model_gen);
  auto model = std::dynamic_pointer_cast<models::TranslationModel>(built.module);
  if (!model) fail(kOp, "model.type '{}' is not a translation model", built.type);
  if (model->padding_idx() != sw.pad_id())
    fail(kOp, "{} = {} but the subword model pads with id {}", cfg.section("model").path("padding_idx"),
         model->padding_idx(), sw.pad_id());
  model->set_generator(model_gen);
  cfg.require_all_used();
  model->to(ts.device);

  if (writer && (!start.resume || !std::filesystem::exists(run.file("config.json")))) run.write_config(cfg.resolved());
  TranslationTask task(model, built.parts, sw.fingerprint(), train, std::move(valid), std::move(test), ds, ts.device,
                       static_cast<std::uint64_t>(ts.seed), label_smoothing, update_freq, *comm);
  return run_training(task, ts, run, start, model_gen, comm.get());
}

}  // namespace define::train
