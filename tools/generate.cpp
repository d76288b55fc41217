// `define generate --run DIR [--checkpoint F] [--words N] [--temperature T] [--seed S]
//                   [--prompt "words ..."]`
// Samples text from a trained language model, one word at a time, carrying the LSTM state: the
// model reads the prompt (or a single <eos>, i.e. the start of a sentence), then each sampled
// word is fed back. Words are drawn from softmax(log p / T) with the Philox stream of --seed, so
// a seed always gives the same text; T = 0 takes the most likely word. Printed with spaces
// between words and a newline for every <eos>; the prompt is printed first.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/run_loader.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "generate";

// Index drawn from softmax(logp / temperature) by inverting the cumulative distribution at u in
// [0, 1); temperature 0: the argmax. In double, after subtracting the maximum, so low
// temperatures do not overflow.
std::int64_t sample(const std::vector<double>& logp, double temperature, double u) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logp.size(); ++i)
    if (logp[i] > logp[best]) best = i;
  if (temperature == 0.0) return static_cast<std::int64_t>(best);
  std::vector<double> w(logp.size());
  double total = 0;
  for (std::size_t i = 0; i < logp.size(); ++i) {
    w[i] = std::exp((logp[i] - logp[best]) / temperature);
    total += w[i];
  }
  double target = u * total, acc = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    acc += w[i];
    if (target < acc) return static_cast<std::int64_t>(i);
  }
  // Rounding can leave target at the very top: the last word with any weight.
  for (std::size_t i = w.size(); i-- > 0;)
    if (w[i] > 0) return static_cast<std::int64_t>(i);
  return static_cast<std::int64_t>(best);
}

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
  const Options opts = parse_options(
      kOp, args,
      {.required = {"run"}, .repeated = {}, .optional = {"checkpoint", "words", "temperature", "seed", "prompt"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define generate --run DIR [--checkpoint F] [--words N] [--temperature T] [--seed S]\n"
        "                       [--prompt \"words ...\"]\n"
        "Samples N words (default 100) from the run's model and prints them, <eos> as a line break.\n"
        "  --checkpoint F   weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n"
        "  --temperature T  divides the log-probabilities before sampling (default 1; 0 = most likely word)\n"
        "  --seed S         random stream of the sampling (default 1); the same seed gives the same text\n"
        "  --prompt TEXT    words the model reads first (each must be in the run's vocabulary)\n");
    return 0;
  }
  const std::int64_t words = opts.has("words") ? opts.get_int("words") : 100;
  if (words < 0) fail(kOp, "--words must be at least 0, got {}", words);
  const double temperature = opts.has("temperature") ? opts.get_double("temperature") : 1.0;
  if (!(temperature >= 0.0) || !std::isfinite(temperature))
    fail(kOp, "--temperature must be a finite number >= 0, got {}", temperature);
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
    const std::int64_t id = sample(last, temperature, u);
    out.word(run.vocab.word(id));
    tokens = from_vector(std::vector<std::int64_t>{id}, {1, 1});
  }
  out.finish();
  return 0;
}

}  // namespace define::cli
