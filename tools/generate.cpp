// `define generate --run DIR [--checkpoint F] [--words N] [--temperature T] [--top-k K] [--top-p P]
//                   [--seed S] [--prompt "words ..."]`
// Samples text from a trained language model, one word at a time, carrying the LSTM state: the
// model reads the prompt (or a single <eos>, i.e. the start of a sentence), then each sampled
// word is fed back. Words are drawn from softmax(log p / T), truncated to the K most likely and
// then to the nucleus of mass P (models/sampling.h), with the Philox stream of --seed, so a seed
// always gives the same text; T = 0 takes the most likely word. Printed with spaces
// between words and a newline for every <eos>; the prompt is printed first.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/sampling.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/run_loader.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "generate";

// Words separated by spaces, <eos> as a line break.
class TextPrinter {
 public:
  void word(const std::string& w) {
    if (w == "<eos>") {
      fmt::print("\n");
      at_line_start_ = true;
      return;
    }
    fmt::print("{}{}", at_line_start_ ? "" : " ", w);
    at_line_start_ = false;
  }
  void finish() {
    if (!at_line_start_) fmt::print("\n");
    std::fflush(stdout);
  }

 private:
  bool at_line_start_ = true;
};

}  // namespace

int run_generate(const std::vector<std::string>& args) {
  const Options opts =
      parse_options(kOp, args,
                    {.required = {"run"},
                     .repeated = {},
                     .optional = {"checkpoint", "words", "temperature", "top-k", "top-p", "seed", "prompt"},
                     .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define generate --run DIR [--checkpoint F] [--words N] [--temperature T] [--top-k K]\n"
        "                       [--top-p P] [--seed S] [--prompt \"words ...\"]\n"
        "Samples N words (default 100) from the run's model and prints them, <eos> as a line break.\n"
        "  --checkpoint F   weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n"
        "  --temperature T  divides the log-probabilities before sampling (default 1; 0 = most likely word)\n"
        "  --top-k K        draws only from the K most likely words (default 0: all)\n"
        "  --top-p P        then only from the fewest most likely words whose probability adds up to P\n"
        "                   (nucleus sampling; default 1: all)\n"
        "  --seed S         random stream of the sampling (default 1); the same seed gives the same text\n"
        "  --prompt TEXT    words the model reads first (each must be in the run's vocabulary)\n");
    return 0;
  }
  const std::int64_t words = opts.has("words") ? opts.get_int("words") : 100;
  if (words < 0) fail(kOp, "--words must be at least 0, got {}", words);
  const models::SamplingOptions sampling{.temperature = opts.has("temperature") ? opts.get_double("temperature") : 1.0,
                                         .top_k = opts.has("top-k") ? opts.get_int("top-k") : 0,
                                         .top_p = opts.has("top-p") ? opts.get_double("top-p") : 1.0};
  if (!(sampling.temperature >= 0.0) || !std::isfinite(sampling.temperature))
    fail(kOp, "--temperature must be a finite number >= 0, got {}", sampling.temperature);
  if (sampling.top_k < 0) fail(kOp, "--top-k must be >= 0 (0: all words), got {}", sampling.top_k);
  if (!(sampling.top_p > 0.0 && sampling.top_p <= 1.0))
    fail(kOp, "--top-p must be in (0, 1] (1: all words), got {}", sampling.top_p);
  const std::int64_t seed = opts.has("seed") ? opts.get_int("seed") : 1;

  train::LoadedRun run = train::load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  std::vector<std::int64_t> context;
  if (opts.has("prompt")) {
    std::istringstream in(opts.get("prompt"));
    for (std::string w; in >> w;) {
      const auto id = run.vocab.find(w);
      if (!id)
        fail(kOp, "prompt word '{}' is not in the run's vocabulary ({} words, {}/vocab.txt)", w, run.vocab.size(),
             run.dir);
      context.push_back(*id);
    }
    if (context.empty()) fail(kOp, "--prompt has no words");
  } else {
    context.push_back(run.vocab.id("<eos>"));
  }

  NoGradGuard no_grad;
  run.model->eval();
  Generator gen(static_cast<std::uint64_t>(seed));
  TextPrinter out;
  if (opts.has("prompt"))
    for (std::int64_t id : context) out.word(run.vocab.word(id));
  models::LmState state;
  Tensor tokens = from_vector(context, {static_cast<std::int64_t>(context.size()), 1});
  for (std::int64_t i = 0; i < words; ++i) {
    auto [logp, next_state] = run.model->log_prob(tokens, state);
    state = std::move(next_state);
    const std::int64_t T = logp.size(0);
    const std::vector<double> last =
        contiguous(to_dtype(reshape(narrow(logp, 0, T - 1, 1), {-1}), DType::Float64)).to_vector<double>();
    const double u = rand_uniform({1}, 0.0, 1.0, {.dtype = DType::Float64}, gen).item_double();
    const std::int64_t id = models::sample_token(last, sampling, u);
    out.word(run.vocab.word(id));
    tokens = from_vector(std::vector<std::int64_t>{id}, {1, 1});
  }
  out.finish();
  return 0;
}

}  // namespace define::cli
