#include "train/lm_trainer.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "distributed/communicator.h"
#include "kernels/host_mirror.h"
#include "models/registry.h"
#include "train/corpus_location.h"
#include "train/run_log.h"

namespace define::train {
namespace {

constexpr const char* kOp = "train";

struct DataSettings {
  std::string corpus_dir;
  std::int64_t batch_size, eval_batch_size, test_batch_size, bptt, eval_bptt;
  bool variable_length;
  bool by_frequency;  // vocabulary ids by descending frequency (adaptive bands), else first occurrence
  bool cache;         // keep the token ids in a cache file for later loads (data/id_cache.h)
};

void require_positive(const Config& c, const char* key, std::int64_t v) {
  if (v < 1) fail(kOp, "{} must be positive, got {}", c.path(key), v);
}

DataSettings read_data(const Config& c) {
  DataSettings d;
  if (c.has("dir") && c.has("corpus"))
    fail(kOp, "{} and {} both say where the corpus is; keep one (a --set of either replaces the other)", c.path("dir"),
         c.path("corpus"));
  d.corpus_dir = c.has("dir") ? c.get_string("dir") : find_corpus(c.get_string("corpus", "ptb"));
  d.batch_size = c.get_int("batch_size", 20);
  d.eval_batch_size = c.get_int("eval_batch_size", 10);
  d.test_batch_size = c.get_int("test_batch_size", 1);
  d.bptt = c.get_int("bptt", 70);
  d.eval_bptt = c.get_int("eval_bptt", d.bptt);
  d.variable_length = c.get_bool("variable_length", true);
  d.cache = c.get_bool("cache", true);
  const std::string order = c.get_string("vocab_order", "first");
  if (order != "first" && order != "frequency")
    fail(kOp, "{} must be 'first' (order of first occurrence) or 'frequency', got '{}'", c.path("vocab_order"), order);
  d.by_frequency = order == "frequency";
  require_positive(c, "batch_size", d.batch_size);
  require_positive(c, "eval_batch_size", d.eval_batch_size);
  require_positive(c, "test_batch_size", d.test_batch_size);
  require_positive(c, "bptt", d.bptt);
  require_positive(c, "eval_bptt", d.eval_bptt);
  return d;
}

// The training streams of this rank: in a data-parallel run of N processes, rank r takes streams
// [r B/N, (r + 1) B/N) of the B columns, so the N ranks together see exactly one process's batch.
Tensor training_streams(const data::Corpus& corpus, std::int64_t batch_size, const dist::Communicator& comm) {
  const Tensor all = data::batchify(corpus.train, batch_size);
  const int world = comm.world_size();
  if (world == 1) return all;
  if (batch_size % world != 0)
    fail(kOp,
         "data.batch_size ({}) must be a multiple of the number of processes ({}): each rank trains on "
         "batch_size / processes streams",
         batch_size, world);
  const std::int64_t share = batch_size / world;
  return contiguous(narrow(all, 1, comm.rank() * share, share));
}

// A language model on a word corpus: AWD-LSTM's batching (B streams, windows of bptt, optionally
// of random length) with the model's state carried from window to window.
class LanguageModelTask : public TrainingTask {
 public:
  LanguageModelTask(std::shared_ptr<models::LanguageModel> model, models::PartRules parts, const data::Corpus& corpus,
                    const DataSettings& ds, Device device, std::uint64_t seed, std::int64_t update_freq,
                    dist::Communicator& comm)
      : comm_(comm),
        update_freq_(update_freq),
        model_(std::move(model)),
        parts_(std::move(parts)),
        vocab_fingerprint_(corpus.vocab.fingerprint()),
        ds_(ds),
        device_(device),
        // Evaluation slices its batches from these, so they live on the device; training batches
        // are cut on the host by the iterator and copied one at a time.
        valid_(to_device(data::batchify(corpus.valid, ds.eval_batch_size), device)),
        test_(to_device(data::batchify(corpus.test, ds.test_batch_size), device)),
        batches_(training_streams(corpus, ds.batch_size, comm),
                 {.bptt = ds.bptt, .variable_length = ds.variable_length, .seed = seed}) {}

  nn::Module& model() override { return *model_; }
  const models::PartRules& parts() const override { return parts_; }
  std::int64_t approx_steps_per_epoch() const override { return batches_.approx_steps_per_epoch(); }

  void start_epoch() override {
    batches_.start_epoch();
    state_ = {};
  }

  // With update_freq = K the window's streams are split into K chunks of B/K columns, each with
  // its own slice of the carried state (Transformer-XL's batch_chunk): K forward and backward
  // passes of a K-th of the activations, gradients summed with weight 1/K each. Every model's
  // loss is a mean over the window's tokens of per-stream terms, so the step equals the unsplit
  // one (to float rounding; with dropout off, since the masks are drawn per pass).
  std::optional<Step> train_step(StepContext& ctx) override {
    const std::optional<data::Batch> batch = batches_.next();
    if (!batch) return std::nullopt;
    ctx.batches_drawn(batch->input.numel());
    const std::int64_t B = batch->input.size(1), chunk = B / update_freq_;
    std::vector<models::LmState> next(static_cast<std::size_t>(update_freq_));
    Tensor loss;
    for (std::int64_t k = 0; k < update_freq_; ++k) {
      const bool whole = update_freq_ == 1;
      const Tensor host_input = whole ? batch->input : contiguous(narrow(batch->input, 1, k * chunk, chunk));
      const Tensor host_target = whole ? batch->target : contiguous(narrow(batch->target, 1, k * chunk, chunk));
      const Tensor input = to_device(host_input, device_), target = to_device(host_target, device_);
      // What the model reads back on the host (the DeFINE unit's distinct ids, adaptive-softmax
      // clusters) it finds here instead of copying it from the device.
      const kernels::HostMirrorScope host_ids({{host_input, input}, {host_target, target}});
      auto out = model_->forward(input, target, whole ? state_ : state_chunk(k * chunk, chunk));
      const Tensor objective = whole ? out.objective : mul(out.objective, 1.0 / static_cast<double>(update_freq_));
      // fp16's loss scale (1 otherwise): the loop unscales the gradients.
      const Tensor scaled = ctx.loss_scale() == 1.0 ? objective : mul(objective, ctx.loss_scale());
      if (k + 1 == update_freq_) ctx.last_backward(scaled);
      backward(scaled);
      next[static_cast<std::size_t>(k)] = models::detach(out.state);
      const Tensor l = whole ? detach(out.loss) : mul(detach(out.loss), 1.0 / static_cast<double>(update_freq_));
      loss = loss.defined() ? add(loss, l) : l;
    }
    state_ = update_freq_ == 1 ? std::move(next[0]) : join_chunks(next);
    // The loss stays on the device: the loop reads it when it logs, not every step.
    return Step{.tokens = batch->input.numel(), .lr_scale = batch->lr_scale, .loss_tensor = loss};
  }

  void discard_carried_state() override { state_ = {}; }

  // The carried state of streams [first, first + n) (empty at the start of a stream).
  models::LmState state_chunk(std::int64_t first, std::int64_t n) const {
    models::LmState s;
    for (const auto& [name, t] : state_) s[name] = contiguous(narrow(t, model_->state_batch_dim(name), first, n));
    return s;
  }
  models::LmState join_chunks(const std::vector<models::LmState>& chunks) const {
    models::LmState s;
    for (const auto& [name, t] : chunks[0]) {
      std::vector<Tensor> parts;
      for (const auto& c : chunks) parts.push_back(c.at(name));
      s[name] = concat(parts, model_->state_batch_dim(name));
    }
    return s;
  }
  std::map<std::string, std::string> checkpoint_labels() const override { return {{"vocab", vocab_fingerprint_}}; }

  double validate() override { return evaluate_lm(*model_, valid_, ds_.eval_bptt); }
  double test() override { return evaluate_lm(*model_, test_, ds_.eval_bptt); }

  // The carried state of every rank, gathered along its batch dimension: the checkpoint holds
  // the whole batch's state whatever the number of processes.
  void save(nn::Checkpoint& ck) const override {
    ck.run["data_position"] = data::to_string(batches_.position());
    for (const auto& [name, t] : state_) {
      if (comm_.world_size() == 1) {
        ck.run_tensors[name] = t;
        continue;
      }
      const std::int64_t d = model_->state_batch_dim(name);
      const Tensor gathered = comm_.all_gather(contiguous(d == 0 ? t : transpose(t, 0, d)));
      ck.run_tensors[name] = d == 0 ? gathered : contiguous(transpose(gathered, 0, d));
    }
  }
  void restore(const nn::Checkpoint& ck) override {
    batches_.restore(checkpoint_field(ck, "data_position"));
    state_ = models::to_device(ck.run_tensors, device_);
    if (comm_.world_size() == 1) return;
    for (auto& [name, t] : state_) {
      const std::int64_t d = model_->state_batch_dim(name), B = t.size(d);
      if (B % comm_.world_size() != 0)
        fail(kOp, "the checkpoint's state '{}' holds {} streams, not a multiple of the {} processes", name, B,
             comm_.world_size());
      const std::int64_t share = B / comm_.world_size();
      t = contiguous(narrow(t, d, comm_.rank() * share, share));
    }
  }

 private:
  dist::Communicator& comm_;
  std::int64_t update_freq_;  // chunks of each window's streams, one forward and backward each
  std::shared_ptr<models::LanguageModel> model_;
  models::PartRules parts_;
  std::string vocab_fingerprint_;
  DataSettings ds_;
  Device device_;
  Tensor valid_, test_;
  data::BpttIterator batches_;
  models::LmState state_;
};

// Every key of the config is checked before any data is read, so that a typo or a bad shape is
// reported in a second, not after the minutes it takes to read a corpus of WikiText-103's size: the
// model is built once with a stand-in vocabulary above every integer of its section (every
// cutoff fits), its keys are read, and it is dropped.
void check_config_before_data(Config& cfg, const Config& train_cfg) {
  const Config model_cfg = cfg.section("model");
  const std::int64_t stand_in =
      model_cfg.has("vocab_size") ? 0 : std::max<std::int64_t>(model_cfg.largest_integer() + 1, 16);
  Generator gen(1);
  const models::BuiltModel built = models::build_model(model_cfg, stand_in, gen);
  const auto model = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
  if (!model) fail(kOp, "model.type '{}' is not a language model (lstm_lm, transformer_xl, delight_lm)", built.type);
  model->read_training_options(train_cfg);
  cfg.require_all_used();
}

// Where the corpus's token-id cache goes (data/id_cache.h): beside the data, in its folder's
// .define-cache/, when that folder can be written, else in the run folder; none with data.cache
// false. One file per vocabulary source, so runs that build their vocabularies differently do not
// overwrite each other's cache.
std::filesystem::path corpus_cache_file(const DataSettings& ds, const data::VocabularySource& vocab,
                                        const std::string& run_dir) {
  if (!ds.cache) return {};
  std::string name = vocab.by_frequency ? "corpus-frequency.ids" : "corpus-first.ids";
  if (vocab.fixed) {
    const std::string fp = vocab.fixed->fingerprint();
    name = "corpus-vocab-" + fp.substr(fp.size() - 8) + ".ids";
  }
  if (::access(ds.corpus_dir.c_str(), W_OK) == 0) return std::filesystem::path(ds.corpus_dir) / ".define-cache" / name;
  return std::filesystem::path(run_dir) / name;
}

data::Corpus load_corpus_with(const DataSettings& ds, const data::VocabularySource& vocab, const std::string& run_dir,
                              bool writer) {
  const std::filesystem::path cache = corpus_cache_file(ds, vocab, run_dir);
  data::CachedCorpus c = data::load_corpus_cached(ds.corpus_dir, vocab, cache);
  if (writer && !cache.empty()) {
    fmt::print("{} {}\n",
               c.from_cache ? "corpus read from its token-id cache" : "corpus tokenised; token ids cached in",
               cache.string());
    std::fflush(stdout);
  }
  return std::move(c.corpus);
}

// The vocabulary is built on the training split, or is the one of the run an --init-from starts
// from (so the ids mean the words they meant there). A resumed run keeps its own vocab.txt: the
// corpus is read as it was first, and against vocab.txt when that differs (a fine-tuned run's).
data::Corpus load_corpus(const DataSettings& ds, const StartOptions& start, const std::string& run_dir, bool writer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!start.init_from.empty()) {
    static_cast<void>(init_checkpoint_path(start.init_from));  // a wrong path is reported as such first
    const fs::path vocab_file = fs::path(init_folder(start.init_from)) / "vocab.txt";
    if (!fs::exists(vocab_file, ec))
      fail(kOp, "--init-from {}: no vocab.txt in {} (the vocabulary its weights were trained with)", start.init_from,
           init_folder(start.init_from));
    return load_corpus_with(ds, {.fixed = data::Vocabulary::load(vocab_file)}, run_dir, writer);
  }
  data::Corpus built = load_corpus_with(ds, {.by_frequency = ds.by_frequency, .fixed = std::nullopt}, run_dir, writer);
  const fs::path own = fs::path(run_dir) / "vocab.txt";
  if (start.resume && fs::exists(own, ec)) {
    data::Vocabulary saved = data::Vocabulary::load(own);
    if (!(saved == built.vocab)) return load_corpus_with(ds, {.fixed = std::move(saved)}, run_dir, writer);
  }
  return built;
}

}  // namespace

double evaluate_lm(models::LanguageModel& model, const Tensor& batches, std::int64_t bptt, std::int64_t context) {
  if (bptt < 1) fail(kOp, "the evaluation window must be at least 1 token, got {}", bptt);
  if (context < 0 || (context > 0 && context >= bptt))
    fail(kOp, "the context window ({}) must be 0 (state carried across windows) or less than the window ({})", context,
         bptt);
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const std::int64_t T = batches.shape()[0], B = batches.shape()[1];
  // Summed NLL of the rows [begin, begin + len) predicting the next ones, from `state`.
  const auto summed_loss = [&](std::int64_t begin, std::int64_t len, models::LmState& state) {
    const Tensor x = contiguous(narrow(batches, 0, begin, len));
    const Tensor y = contiguous(narrow(batches, 0, begin + 1, len));
    auto out = model.forward(x, y, state);
    state = std::move(out.state);
    return out.loss.item_double() * static_cast<double>(len * B);
  };
  double total = 0;
  std::int64_t tokens = 0;
  if (context == 0) {
    models::LmState state;
    for (std::int64_t i = 0; i + 1 < T; i += bptt) {
      const std::int64_t len = std::min(bptt, T - 1 - i);
      total += summed_loss(i, len, state);
      tokens += len * B;
    }
  } else {
    // next: the first row not scored yet; each window starts up to `context` rows before it.
    for (std::int64_t next = 0; next + 1 < T;) {
      const std::int64_t begin = std::max<std::int64_t>(0, next - context);
      const std::int64_t len = std::min(bptt, T - 1 - begin), prefix = next - begin;
      models::LmState fresh, fresh_prefix;
      total += summed_loss(begin, len, fresh);
      if (prefix > 0) total -= summed_loss(begin, prefix, fresh_prefix);
      tokens += (len - prefix) * B;
      next = begin + len;
    }
  }
  model.train(was_training);
  if (tokens == 0) fail(kOp, "evaluation split is too short for batch size {}", B);
  return total / static_cast<double>(tokens);
}

TrainResult train_language_model(Config& cfg, const std::string& run_dir, const StartOptions& start) {
  const DataSettings ds = read_data(cfg.section("data"));
  const Config train_cfg = cfg.section("train");
  const LoopSettings ts = read_loop_settings(train_cfg);
  const std::int64_t update_freq = train_cfg.get_int("update_freq", 1);
  require_positive(train_cfg, "update_freq", update_freq);
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator(ts.distributed, ts.device);
  if (ds.batch_size % comm->world_size() == 0 && (ds.batch_size / comm->world_size()) % update_freq != 0)
    fail(kOp, "{} ({}) must divide the streams each process trains on (data.batch_size {} / {} process(es))",
         train_cfg.path("update_freq"), update_freq, ds.batch_size, comm->world_size());

  check_config_before_data(cfg, train_cfg);

  data::Corpus corpus = load_corpus(ds, start, run_dir, comm->rank() == 0);
  Generator model_gen(static_cast<std::uint64_t>(ts.seed));
  models::BuiltModel built = models::build_model(cfg.section("model"), corpus.vocab.size(), model_gen);
  auto model = std::dynamic_pointer_cast<models::LanguageModel>(built.module);
  if (!model) fail(kOp, "model.type '{}' is not a language model (lstm_lm, transformer_xl, delight_lm)", built.type);
  model->set_generator(model_gen);
  model->read_training_options(train_cfg);
  cfg.require_all_used();
  model->to(ts.device);  // before the optimizer takes the parameters

  const bool writer = comm->rank() == 0;  // rank 0 writes the run's files
  RunDir run(run_dir, start.resume, writer);
  // A resumed run keeps the files it started with; one killed before writing them gets them now.
  if (writer && (!start.resume || !std::filesystem::exists(run.file("config.json")))) run.write_config(cfg.resolved());
  if (writer && (!start.resume || !std::filesystem::exists(run.file("vocab.txt"))))
    corpus.vocab.save(run.file("vocab.txt"));
  LanguageModelTask task(model, built.parts, corpus, ds, ts.device, static_cast<std::uint64_t>(ts.seed), update_freq,
                         *comm);
  // The task holds its batches; the ids they were cut from go (0.8 GB for WikiText-103).
  corpus.train = {};
  corpus.valid = {};
  corpus.test = {};
  return run_training(task, ts, run, start, model_gen, comm.get());
}

}  // namespace define::train
