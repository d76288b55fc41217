// The data side of machine translation on a real corpus: for each subword vocabulary size, the
// time to train a joint SentencePiece model on train.<src> + train.<tgt>, the mean subword tokens
// per sentence on each side, and the token-count batches of train at --max-tokens: how many, how
// many sentences and tokens a batch holds, and the fraction of the padded [S, B] / [T, B] tensors
// that is padding (tgt counts tgt_out; tgt_in has the same shape and pad count).
//
//   nmt_data_bench --data DIR [--src de] [--tgt en] [--vocab 8000,10000] [--type bpe]
//                  [--max-tokens 4096] [--max-len 0] [--threads 2] [--out DIR]
//
// DIR holds train.<src> and train.<tgt> (Multi30k: `scripts/get-data multi30k` prints its folder).
// Models go to --out (created if missing; default: a fresh folder under the system temp dir, kept,
// its path printed).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "data/parallel.h"
#include "data/subword.h"
#include "data/token_batches.h"

namespace {

using namespace define;
using namespace define::data;
namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A whole decimal number, else an error naming the option.
std::int64_t to_int(const std::string& option, const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail("nmt_data_bench", "{} expects a whole number, got '{}'", option, text);
  return v;
}

std::vector<std::int64_t> parse_list(const std::string& option, const std::string& s) {
  std::vector<std::int64_t> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t end = std::min(s.find(',', i), s.size());
    out.push_back(to_int(option, s.substr(i, end - i)));
    i = end + 1;
  }
  return out;
}

void report(std::int64_t vocab, const SubwordOptions& base, const fs::path& train_src, const fs::path& train_tgt,
            const fs::path& out, std::int64_t max_tokens, std::int64_t max_len) {
  SubwordOptions opt = base;
  opt.vocab_size = vocab;
  auto t0 = std::chrono::steady_clock::now();
  const Subword sw = Subword::train({train_src, train_tgt}, opt, out / fmt::format("spm{}", vocab));
  const double train_s = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  const ParallelData d = load_parallel(train_src, train_tgt, sw, max_len);
  const double load_s = seconds_since(t0);
  double src_tok = 0, tgt_tok = 0;
  for (std::int64_t i = 0; i < d.size(); ++i) {
    src_tok += static_cast<double>(d.src[static_cast<std::size_t>(i)].size());
    tgt_tok += static_cast<double>(d.tgt[static_cast<std::size_t>(i)].size());
  }

  t0 = std::chrono::steady_clock::now();
  TokenBatcher batcher(d, max_tokens, true, 1);
  double src_cells = 0, tgt_cells = 0, src_real = 0, tgt_real = 0, sentences = 0;
  std::int64_t batches = 0;
  while (auto b = batcher.next()) {
    ++batches;
    src_cells += static_cast<double>(b->src.numel());
    tgt_cells += static_cast<double>(b->tgt_out.numel());
    src_real += static_cast<double>(b->src_tokens);
    tgt_real += static_cast<double>(b->tgt_tokens);
    sentences += static_cast<double>(b->ids.size());
  }
  const double batch_s = seconds_since(t0);

  const double n = static_cast<double>(d.size());
  fmt::print("vocab {} ({}): {} pieces, trained in {:.2f} s; {}\n", vocab, opt.model_type, sw.size(), train_s,
             sw.fingerprint());
  fmt::print("  train: {} line pairs, {} kept, {} empty, {} too long; read + encoded in {:.2f} s\n", d.lines, d.size(),
             d.skipped_empty, d.skipped_too_long, load_s);
  fmt::print("  tokens per sentence (eos included): src {:.2f}, tgt {:.2f} (without eos: {:.2f}, {:.2f})\n",
             src_tok / n, tgt_tok / n, src_tok / n - 1, tgt_tok / n - 1);
  fmt::print(
      "  max_tokens {}: {} batches (built in {:.2f} s), {:.1f} sentences / {:.0f} src + {:.0f} tgt tokens a batch\n",
      max_tokens, batches, batch_s, sentences / static_cast<double>(batches), src_real / static_cast<double>(batches),
      tgt_real / static_cast<double>(batches));
  fmt::print("  padding: src {:.2f}%, tgt {:.2f}%, both {:.2f}%\n", 100 * (1 - src_real / src_cells),
             100 * (1 - tgt_real / tgt_cells), 100 * (1 - (src_real + tgt_real) / (src_cells + tgt_cells)));
}

}  // namespace

int main(int argc, char** argv) {
  fs::path data, out;
  std::string src = "de", tgt = "en", vocabs = "8000,10000";
  SubwordOptions opt;
  std::int64_t max_tokens = 4096, max_len = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= argc) {
          fmt::print(stderr, "nmt_data_bench: {} needs a value\n", a);
          std::exit(2);
        }
        return argv[++i];
      };
      if (a == "--data")
        data = value();
      else if (a == "--src")
        src = value();
      else if (a == "--tgt")
        tgt = value();
      else if (a == "--vocab")
        vocabs = value();
      else if (a == "--type")
        opt.model_type = value();
      else if (a == "--max-tokens")
        max_tokens = to_int(a, value());
      else if (a == "--max-len")
        max_len = to_int(a, value());
      else if (a == "--threads")
        opt.threads = to_int(a, value());
      else if (a == "--out")
        out = value();
      else {
        fmt::print(stderr, "nmt_data_bench: unknown argument '{}' (see the comment at the top of the source)\n", a);
        return 2;
      }
    }
    if (data.empty()) {
      fmt::print(stderr,
                 "usage: nmt_data_bench --data DIR [--src de] [--tgt en] [--vocab 8000,10000] [--type bpe] "
                 "[--max-tokens 4096] [--max-len 0] [--threads 2] [--out DIR]\n");
      return 2;
    }
    if (out.empty()) out = fs::temp_directory_path() / fmt::format("nmt-data-bench-{}", ::getpid());
    fs::create_directories(out);
    fmt::print("{} -> {}, models in {}, {} trainer threads\n", (data / ("train." + src)).string(), tgt, out.string(),
               opt.threads);
    for (std::int64_t v : parse_list("--vocab", vocabs))
      report(v, opt, data / ("train." + src), data / ("train." + tgt), out, max_tokens, max_len);
  } catch (const std::exception& e) {
    fmt::print(stderr, "nmt_data_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
