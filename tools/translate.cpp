// `define translate --run DIR [--input FILE] [--output FILE] [--checkpoint F] [--beam 5]
//                   [--lenpen 1.0] [--max-len-a 0] [--max-len-b 200] [--min-len 1]
//                   [--batch-size 64] [--device cpu] [--threads N]`
// Translates text with a trained translation model: one sentence a line, from FILE or standard
// input, to FILE or standard output, line for line (an empty line gives an empty line). Each
// line is encoded with the run's subword model (with eos, as in training), sentences are decoded
// in batches of similar length by batched beam search with incremental decoding
// (models/beam_search.h), and the best hypothesis is decoded back to text.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "models/beam_search.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/training_loop.h"
#include "train/translation_run.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "translate";

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

int run_translate(const std::vector<std::string>& args) {
  const Options opts = parse_options(kOp, args,
                                     {.required = {"run"},
                                      .repeated = {},
                                      .optional = {"input", "output", "checkpoint", "beam", "lenpen", "max-len-a",
                                                   "max-len-b", "min-len", "batch-size", "device", "threads"},
                                      .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define translate --run DIR [--input FILE] [--output FILE] [--checkpoint F] [--beam 5]\n"
        "                        [--lenpen 1.0] [--max-len-a 0] [--max-len-b 200] [--min-len 1]\n"
        "                        [--batch-size 64] [--device cpu] [--threads N]\n"
        "Translates one sentence a line with the run's model (beam search) and writes the best translation of\n"
        "each line, detokenised.\n"
        "  --input FILE      text to translate (default: standard input)\n"
        "  --output FILE     where translations go (default: standard output)\n"
        "  --checkpoint F    weights (default the run's best.ckpt, else latest.ckpt)\n"
        "  --beam K          hypotheses kept per sentence (1: greedy)\n"
        "  --lenpen A        score = log-probability / length^A\n"
        "  --max-len-a A, --max-len-b B   at most A x source length + B target subwords before eos (the source\n"
        "                    length without its eos, as fairseq counts both)\n"
        "  --min-len N       at least N subwords before eos (1: no empty translation)\n"
        "  --batch-size N    sentences decoded together\n"
        "  --device D        cpu, cuda[:N] or emu\n"
        "  --threads N       CPU threads (default the run's train.threads)\n");
    return 0;
  }
  const Device device = train::training_device(opts.has("device") ? opts.get("device") : "cpu", "--device");
  train::TranslationRun run =
      train::load_translation_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  omp_set_num_threads(static_cast<int>(opts.has("threads") ? opts.get_int("threads") : run.config.section("train").get_int("threads", 2)));
  run.model->to(device);

  models::BeamSearchOptions bs;
  if (opts.has("beam")) bs.beam = opts.get_int("beam");
  if (opts.has("lenpen")) bs.lenpen = opts.get_double("lenpen");
  if (opts.has("max-len-a")) bs.max_len_a = opts.get_double("max-len-a");
  if (opts.has("max-len-b")) bs.max_len_b = opts.get_int("max-len-b");
  if (opts.has("min-len")) bs.min_len = opts.get_int("min-len");
  bs.bos = run.subword.bos_id();
  bs.eos = run.subword.eos_id();
  bs.unk = run.subword.unk_id();
  models::check_beam_search_options(bs, run.model->vocab());
  const std::int64_t batch_size = opts.has("batch-size") ? opts.get_int("batch-size") : 64;
  if (batch_size < 1) fail(kOp, "--batch-size must be positive, got {}", batch_size);

  std::vector<std::string> lines;
  if (opts.has("input")) {
    std::ifstream in(opts.get("input"), std::ios::binary);
    if (!in) fail(kOp, "cannot read '{}'", opts.get("input"));
    lines = read_lines(in);
  } else {
    lines = read_lines(std::cin);
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<std::int32_t>> src(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    src[i] = run.subword.encode(lines[i]);
    if (!src[i].empty()) src[i].push_back(static_cast<std::int32_t>(bs.eos));
  }
  // Longest first, so each batch holds sentences of similar length (little padding).
  std::vector<std::size_t> order(lines.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return src[a].size() > src[b].size(); });
  std::vector<std::string> out(lines.size());
  const std::int64_t pad = run.model->padding_idx();
  for (std::size_t first = 0; first < order.size(); first += static_cast<std::size_t>(batch_size)) {
    std::vector<std::size_t> ids;
    for (std::size_t j = first; j < std::min(order.size(), first + static_cast<std::size_t>(batch_size)); ++j)
      if (!src[order[j]].empty()) ids.push_back(order[j]);
    if (ids.empty()) continue;
    const std::int64_t B = static_cast<std::int64_t>(ids.size()), S = static_cast<std::int64_t>(src[ids[0]].size());
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(S * B), pad);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::size_t s = 0; s < src[ids[b]].size(); ++s) tokens[static_cast<std::int64_t>(s) * B + b] = src[ids[b]][s];
    const auto hyps = models::beam_search(*run.model, from_vector(tokens, {S, B}, device), bs);
    for (std::int64_t b = 0; b < B; ++b)
      if (!hyps[b].empty()) out[ids[b]] = run.subword.decode(hyps[b][0].tokens);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string text;
  for (const auto& line : out) text += line + "\n";
  if (opts.has("output")) {
    std::ofstream f(opts.get("output"), std::ios::binary | std::ios::trunc);
    if (!f || !(f << text) || !f.flush()) fail(kOp, "cannot write '{}'", opts.get("output"));
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);  // before the summary on stderr, so a terminal shows them in order
  }
  fmt::print(stderr, "translated {} sentences in {:.1f} s ({:.1f} sentences/s), beam {}\n", lines.size(), seconds,
             seconds > 0 ? static_cast<double>(lines.size()) / seconds : 0.0, bs.beam);
  return 0;
}

}  // namespace define::cli
