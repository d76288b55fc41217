// Loading a corpus of WikiText-103's size: a synthetic corpus with WikiText-103's shape (267,735
// words of a Zipf distribution, 103,227,021 training tokens in 1,801,350 lines, 217,646 and
// 245,569 in valid and test: about 0.5 GB of text) is written to a folder, then
//   1. loaded in this process through the token-id cache twice (data/id_cache.h): the first load
//      tokenises and writes the cache, the second reads it;
//   2. `define train` is started on it twice (a small LSTM; the first run without a cache, the
//      second with the one the first wrote) and stopped at its first training step, reading the
//      step's peak resident memory from metrics.jsonl and the time from start to that step.
// Peak memory is set against the corpus's own size on disk.
//
//   corpus_load_bench [--scale S] [--dir DIR] [--define PATH] [--keep]
//
// --scale multiplies every count but the vocabulary (default 1: WikiText-103's size; 0.01 for a
// quick look); --dir is where the corpus goes (default a fresh folder in the system temp dir,
// removed at the end unless --keep); --define the `define` executable (default: ../tools/define
// beside this benchmark).
#include <fmt/format.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/corpus.h"

namespace {

using namespace define;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kVocab = 267735 - 1;  // WikiText-103's words; <eos> is the last one
constexpr std::int64_t kTrainTokens = 103227021, kValidTokens = 217646, kTestTokens = 245569;
constexpr std::int64_t kTrainLines = 1801350, kValidLines = 3760, kTestLines = 4358;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

// Word r of the vocabulary: lower-case letters spelling r in base 26, padded with upper-case ones
// (so no two ranks collide) to at least 4, so that the text has about WikiText-103's 5.2 bytes a
// token (word, space and line ends).
std::string word_of(std::int64_t r) {
  std::string w;
  for (std::int64_t v = r;; v /= 26) {
    w += static_cast<char>('a' + v % 26);
    if (v < 26) break;
  }
  while (w.size() < 4) w += 'E';
  return w;
}

// Writes `lines` lines holding `tokens` words drawn from Zipf(1) over the vocabulary (inverse CDF),
// after every word once when `every_word` (so valid and test have no word train lacks).
void write_split(const fs::path& file, std::int64_t tokens, std::int64_t lines, bool every_word,
                 const std::vector<double>& cdf, const std::vector<std::string>& words, std::mt19937_64& rng) {
  std::ofstream out(file, std::ios::binary);
  if (!out) fail("corpus_load_bench", "cannot write {}", file.string());
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::string buf;
  buf.reserve(1 << 22);
  const double per_line = static_cast<double>(tokens) / static_cast<double>(lines);
  std::int64_t written = 0;
  for (std::int64_t line = 0; line < lines; ++line) {
    const auto end = static_cast<std::int64_t>(std::llround(per_line * static_cast<double>(line + 1)));
    for (; written < end; ++written) {
      const std::size_t r =
          every_word && written < static_cast<std::int64_t>(words.size())
              ? static_cast<std::size_t>(written)
              : static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
      buf += ' ';
      buf += words[std::min(r, words.size() - 1)];
    }
    buf += " \n";
    if (buf.size() > (1 << 22) - 256) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (!out.flush()) fail("corpus_load_bench", "could not write {} (disk full?)", file.string());
}

struct TrainStart {
  double seconds_to_first_step = 0;
  double peak_rss_bytes = 0;
  std::string corpus_line;  // what define train said about its corpus and cache
};

// Runs `define train` until metrics.jsonl has its first training record, then stops it.
TrainStart first_step_of_define_train(const fs::path& define, const fs::path& config, const fs::path& run) {
  fs::remove_all(run);
  const fs::path log = run.string() + ".log";
  const auto t0 = Clock::now();
  std::fflush(stdout);  // or the child would print this process's buffered lines again
  const pid_t pid = fork();
  if (pid < 0) fail("corpus_load_bench", "fork failed");
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stdout) || !std::freopen(log.c_str(), "a", stderr)) _exit(126);
    execl(define.c_str(), define.c_str(), "train", "--config", config.c_str(), "--run-dir", run.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  TrainStart out;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::ifstream l(log);
      const std::string text((std::istreambuf_iterator<char>(l)), {});
      fail("corpus_load_bench", "define train ended before its first step (status {}):\n{}", status, text);
    }
    std::ifstream metrics(run / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      if (line.find("\"event\":\"train\"") == std::string::npos || line.back() != '}') continue;
      out.seconds_to_first_step = seconds_since(t0);
      out.peak_rss_bytes = nlohmann::json::parse(line)["peak_rss_bytes"].get<double>();
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      std::ifstream l(log);
      for (std::string said; std::getline(l, said);)
        if (said.find("corpus") != std::string::npos) out.corpus_line = said;
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) try {
  double scale = 1.0;
  fs::path dir, define = fs::path(argv[0]).parent_path() / ".." / "tools" / "define";
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("corpus_load_bench", "{} needs a value", a);
      return argv[++i];
    };
    if (a == "--scale")
      scale = std::stod(value());
    else if (a == "--dir")
      dir = value();
    else if (a == "--define")
      define = value();
    else if (a == "--keep")
      keep = true;
    else
      fail("corpus_load_bench", "unknown option '{}' (--scale S, --dir DIR, --define PATH, --keep)", a);
  }
  if (!(scale > 0 && scale <= 4)) fail("corpus_load_bench", "--scale must be in (0, 4], got {}", scale);
  if (!fs::exists(define))
    fail("corpus_load_bench", "no define executable at {} (build it, or pass --define)", define.string());
  const bool own_dir = dir.empty();
  if (own_dir) dir = fs::temp_directory_path() / fmt::format("define_corpus_load_bench_{}", ::getpid());
  fs::create_directories(dir);
  const auto n = [&](std::int64_t count) {
    return std::max<std::int64_t>(1, std::llround(static_cast<double>(count) * scale));
  };

  // Zipf(1) over the vocabulary, as word frequencies in English text roughly are.
  std::vector<double> cdf(kVocab);
  double total = 0;
  for (std::int64_t r = 0; r < kVocab; ++r)
    cdf[static_cast<std::size_t>(r)] = total += 1.0 / static_cast<double>(r + 1);
  for (double& c : cdf) c /= total;
  std::vector<std::string> words;
  for (std::int64_t r = 0; r < kVocab; ++r) words.push_back(word_of(r));
  std::mt19937_64 rng(103);
  auto t0 = Clock::now();
  // The token counts include one <eos> a line, as define (and AWD-LSTM) count them.
  write_split(dir / "train.txt", n(kTrainTokens) - n(kTrainLines), n(kTrainLines), true, cdf, words, rng);
  write_split(dir / "valid.txt", n(kValidTokens) - n(kValidLines), n(kValidLines), false, cdf, words, rng);
  write_split(dir / "test.txt", n(kTestTokens) - n(kTestLines), n(kTestLines), false, cdf, words, rng);
  const double bytes = static_cast<double>(fs::file_size(dir / "train.txt") + fs::file_size(dir / "valid.txt") +
                                           fs::file_size(dir / "test.txt"));
  fmt::print("corpus: {} (scale {}), {:.2f} GiB of text, written in {:.1f} s\n", dir.string(), scale, gib(bytes),
             seconds_since(t0));

  // 1. In this process: tokenise and write the cache, then read it.
  const fs::path cache = dir / ".define-cache" / "bench.ids";
  t0 = Clock::now();
  const data::CachedCorpus first = data::load_corpus_cached(dir, {}, cache);
  const double first_s = seconds_since(t0);
  t0 = Clock::now();
  const data::CachedCorpus again = data::load_corpus_cached(dir, {}, cache);
  const double cached_s = seconds_since(t0);
  if (first.from_cache || !again.from_cache || !(again.corpus.vocab == first.corpus.vocab) ||
      again.corpus.train != first.corpus.train)
    fail("corpus_load_bench", "the cached load differs from the first one");
  fmt::print(
      "load in process: {} training tokens, {} words; first load (tokenise + write the {:.2f} GiB cache) "
      "{:.1f} s, cached load {:.1f} s ({:.1f}x faster)\n",
      first.corpus.train.size(), first.corpus.vocab.size(), gib(static_cast<double>(fs::file_size(cache))), first_s,
      cached_s, first_s / cached_s);
  fs::remove(cache);

  // 2. define train up to its first step, without and with the cache.
  const fs::path config = dir / "bench-config.json";
  std::ofstream(config) << fmt::format(
      R"({{"data": {{"dir": "{}", "batch_size": 4, "bptt": 16, "eval_batch_size": 4, "test_batch_size": 4}},
  "model": {{"type": "lstm_lm", "input": {{"type": "embedding", "dim": 16}}, "hidden": 16, "layers": 1,
            "dropout": {{"embedding": 0, "input": 0, "hidden": 0, "output": 0, "weight": 0}}}},
  "train": {{"optimizer": "sgd", "lr": 1, "log_interval": 1, "max_steps": 1000, "threads": 2}}}})",
      dir.string());
  fmt::print("define train up to its first step (a 1-layer LSTM of width 16: the corpus dominates), {}:\n",
             define.string());
  fmt::print("{:<26} {:>16} {:>16} {:>24}\n", "", "time to step 1", "peak RSS", "peak RSS / corpus size");
  for (const char* which : {"first run (tokenises)", "second run (cache)"}) {
    const TrainStart s = first_step_of_define_train(define, config, dir / "bench-run");
    fmt::print("{:<26} {:>14.1f} s {:>12.2f} GiB {:>24.2f}\n", which, s.seconds_to_first_step, gib(s.peak_rss_bytes),
               s.peak_rss_bytes / bytes);
    if (!s.corpus_line.empty()) fmt::print("  ({})\n", s.corpus_line);
  }
  if (own_dir && !keep) fs::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "corpus_load_bench: %s\n", e.what());
  return 1;
}
