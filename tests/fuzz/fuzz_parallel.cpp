// Fuzz target: the parallel-corpus reader and what the translation trainer makes of it
// (train/nmt_trainer.cpp): data/parallel.h's load_parallel (a split's line-aligned <split>.<src> and
// <split>.<tgt>, read through data/text_lines.h and encoded by a subword model), the subword
// model's training on the train split's two files (Subword::train, data/subword.h: the trainer's
// first step on a fresh run), and the token-count batches of data/token_batches.h.
//
// Input: NUL-separated parts: the source text, the target text (a missing part is a missing file),
// max_len (decimal, 0 or absent: no limit, '-': negative), and, when present, the vocabulary size
// of a BPE model to train on the two files first (decimal, taken modulo 64 plus 5: small enough
// for short texts to fill, as SentencePiece's hard vocabulary limit wants). The pair is loaded with
// each of two fixed models trained once at start-up (BPE without, unigram with byte fallback) and
// with the trained one, then batched at two token budgets.
// Properties checked on what is accepted: the counts add up (kept + skipped = line pairs), every
// kept side is non-empty, ends in eos, holds no other eos and ids in the vocabulary only, and is
// within max_len; line numbers ascend within the pairs read; each side decodes; every epoch's
// batches hold every sentence exactly once, within max_tokens, laid out as token_batches.h says.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/parallel.h"
#include "data/subword.h"
#include "data/token_batches.h"
#include "fuzz_util.h"

namespace {

using define::data::load_parallel;
using define::data::ParallelData;
using define::data::Subword;
using define::data::SubwordOptions;
using define::data::TokenBatcher;
using define::fuzz::check;
using define::fuzz::expect_define_error;
namespace fs = std::filesystem;

// Text for the fixed models: German and English lines, as the translation configs pair them.
constexpr std::string_view kTrainText =
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.\n"
    "Two young, White males are outside near many bushes.\n"
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.\n"
    "Several men in hard hats are operating a giant pulley system.\n"
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.\n"
    "A little girl climbing into a wooden playhouse.\n"
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster.\n"
    "A man in a blue shirt is standing on a ladder cleaning windows.\n"
    "Zwei Männer stehen am Herd und bereiten Essen zu.\n"
    "Two men are at the stove preparing food.\n";

const std::vector<Subword>& fixed_models() {
  static const std::vector<Subword> models = [] {
    const fs::path dir = define::fuzz::scratch_dir() / "models";
    fs::create_directories(dir);
    const std::string text = define::fuzz::write_scratch("models/train.txt", kTrainText);
    SubwordOptions bpe;
    bpe.vocab_size = 120;
    bpe.threads = 1;
    SubwordOptions unigram;
    unigram.model_type = "unigram";
    unigram.vocab_size = 320;
    unigram.byte_fallback = true;
    unigram.threads = 1;
    return std::vector<Subword>{Subword::train({text}, bpe, dir / "bpe"),
                                Subword::train({text}, unigram, dir / "unigram")};
  }();
  return models;
}

// A decimal count of at most 6 digits; nullopt for anything else.
std::optional<std::int64_t> count_of(std::string_view s) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(std::string(s));
}

void check_side(const std::vector<std::int32_t>& ids, const Subword& sw, std::int64_t max_len) {
  check(!ids.empty() && ids.back() == sw.eos_id(), "a kept side does not end in eos");
  check(max_len == 0 || static_cast<std::int64_t>(ids.size()) <= max_len, "a kept side is longer than max_len");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < sw.size(), "an id is outside the vocabulary");
    check(i + 1 == ids.size() || ids[i] != sw.eos_id(), "eos inside a sentence");
  }
  check(ids.size() > 1, "a kept side holds nothing but eos");
  expect_define_error([&] { (void)sw.decode(ids); });
}

void check_data(const ParallelData& d, const Subword& sw, std::int64_t max_len) {
  check(d.src.size() == d.tgt.size() && d.src.size() == d.line.size(), "the sides and line numbers differ in count");
  check(d.size() + d.skipped_empty + d.skipped_too_long == d.lines, "kept and skipped pairs do not add up");
  check(d.pad_id == sw.pad_id() && d.bos_id == sw.bos_id() && d.eos_id == sw.eos_id(),
        "the data's special ids are not the model's");
  for (std::size_t i = 0; i < d.src.size(); ++i) {
    check(d.line[i] >= 1 && d.line[i] <= d.lines && (i == 0 || d.line[i] > d.line[i - 1]),
          "line numbers do not ascend within the pairs read");
    check_side(d.src[i], sw, max_len);
    check_side(d.tgt[i], sw, max_len);
  }
}

// Column b of a [len, B] int64 tensor.
std::vector<std::int64_t> column(const define::Tensor& t, std::int64_t b) {
  check(t.dim() == 2 && t.is_contiguous(), "a batch tensor is not a contiguous [len, B] table");
  const std::int64_t len = t.size(0), cols = t.size(1);
  const std::int64_t* p = t.data<std::int64_t>();
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < len; ++i) out.push_back(p[i * cols + b]);
  return out;
}

void check_batches(const ParallelData& d, std::int64_t max_tokens) {
  std::optional<TokenBatcher> batcher;
  if (!expect_define_error([&] { batcher.emplace(d, max_tokens, /*shuffle=*/true, /*seed=*/7); })) return;
  std::vector<int> seen(d.src.size(), 0);
  batcher->start_epoch(1);
  while (const auto batch = batcher->next()) {
    const std::int64_t B = static_cast<std::int64_t>(batch->ids.size());
    check(B > 0 && batch->src.size(1) == B && batch->tgt_in.size(1) == B && batch->tgt_out.size(1) == B,
          "a batch's tensors do not hold its sentences");
    check(batch->tgt_in.size(0) == batch->tgt_out.size(0), "tgt_in and tgt_out differ in length");
    check(B * std::max(batch->src.size(0), batch->tgt_out.size(0)) <= max_tokens, "a batch exceeds max_tokens");
    std::int64_t src_tokens = 0, tgt_tokens = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t id = batch->ids[static_cast<std::size_t>(b)];
      check(id >= 0 && id < d.size(), "a batch names a sentence that does not exist");
      ++seen[static_cast<std::size_t>(id)];
      const auto& s = d.src[static_cast<std::size_t>(id)];
      const auto& t = d.tgt[static_cast<std::size_t>(id)];
      const std::vector<std::int64_t> src = column(batch->src, b), in = column(batch->tgt_in, b),
                                      out = column(batch->tgt_out, b);
      for (std::size_t i = 0; i < src.size(); ++i)
        check(src[i] == (i < s.size() ? s[i] : d.pad_id), "a source column is not the sentence, then padding");
      for (std::size_t i = 0; i < out.size(); ++i) {
        check(out[i] == (i < t.size() ? t[i] : d.pad_id), "a tgt_out column is not the target, then padding");
        check(in[i] == (i == 0         ? d.bos_id
                        : i < t.size() ? t[i - 1]
                                       : d.pad_id),
              "a tgt_in column is not bos and the target shifted right, then padding");
      }
      src_tokens += static_cast<std::int64_t>(s.size());
      tgt_tokens += static_cast<std::int64_t>(t.size());
    }
    check(batch->src_tokens == src_tokens && batch->tgt_tokens == tgt_tokens, "a batch miscounts its tokens");
  }
  check(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }),
        "an epoch does not hold every sentence exactly once");
}

void load_and_batch(const fs::path& src, const fs::path& tgt, const Subword& sw, std::int64_t max_len) {
  std::optional<ParallelData> d;
  if (!expect_define_error([&] { d.emplace(load_parallel(src, tgt, sw, max_len)); })) return;
  check_data(*d, sw, max_len);
  check_batches(*d, 4096);
  check_batches(*d, 24);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<Subword>& models = fixed_models();
  const std::vector<std::string_view> parts = define::fuzz::split(data, size);
  const fs::path dir = define::fuzz::scratch_dir() / "corpus";
  fs::remove_all(dir);
  fs::create_directory(dir);
  const char* const names[] = {"train.de", "train.en"};
  for (std::size_t i = 0; i < 2 && i < parts.size(); ++i)
    define::fuzz::write_scratch(std::string("corpus/") + names[i], parts[i]);
  std::int64_t max_len = 0;
  if (parts.size() > 2) max_len = !parts[2].empty() && parts[2][0] == '-' ? -1 : count_of(parts[2]).value_or(0);

  for (const Subword& sw : models) load_and_batch(dir / names[0], dir / names[1], sw, max_len);
  if (parts.size() > 3) {
    SubwordOptions opt;
    opt.vocab_size = 5 + count_of(parts[3]).value_or(0) % 64;
    opt.threads = 1;
    std::optional<Subword> trained;
    if (expect_define_error([&] {
          trained.emplace(Subword::train({dir / names[0], dir / names[1]}, opt, dir / "subword"));
        }))
      load_and_batch(dir / names[0], dir / names[1], *trained, max_len);
  }
  return 0;
}
