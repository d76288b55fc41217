#include "data/corpus.h"

#include <algorithm>
#include <numeric>
#include <system_error>

#include <zlib.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/id_cache.h"
#include "data/text_file.h"

namespace define::data {

namespace {

// The ASCII whitespace of Python's str.split() minus '\n', which separates lines here.
bool is_word_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

bool has_space(std::string_view word) {
  for (char c : word)
    if (c == '\n' || is_word_space(c)) return true;
  return false;
}

// Calls on_word(word, line_number) for every word and on_eos(line_number) at the end of every line.
template <typename OnWord, typename OnEos>
void for_each_token(std::string_view text, OnWord&& on_word, OnEos&& on_eos) {
  std::int64_t line = 1;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const std::size_t end = std::min(text.find('\n', i), n);
    std::size_t p = i;
    while (p < end) {
      while (p < end && is_word_space(text[p])) ++p;
      const std::size_t start = p;
      while (p < end && !is_word_space(text[p])) ++p;
      if (p > start) on_word(text.substr(start, p - start), line);
    }
    on_eos(line);
    ++line;
    i = end + 1;  // past the '\n' (or past the end for a last line without one)
  }
}

std::string read_split(const std::filesystem::path& file, std::string_view who) {
  std::string text = read_text_file(file, who);
  if (text.empty()) fail(who, "split '{}' is empty (0 bytes): expected one sentence a line", file.string());
  return text;
}

}  // namespace

std::int64_t Vocabulary::add(std::string_view word) {
  if (auto it = ids_.find(word); it != ids_.end()) return it->second;
  if (word.empty()) fail("Vocabulary::add", "empty word");
  if (has_space(word)) fail("Vocabulary::add", "word '{}' contains whitespace", word);
  const std::int64_t id = size();
  words_.emplace_back(word);
  ids_.emplace(words_.back(), id);
  return id;
}

std::optional<std::int64_t> Vocabulary::find(std::string_view word) const {
  if (auto it = ids_.find(word); it != ids_.end()) return it->second;
  return std::nullopt;
}

std::int64_t Vocabulary::id(std::string_view word) const {
  if (auto it = ids_.find(word); it != ids_.end()) return it->second;
  fail("Vocabulary::id", "word '{}' is not in the vocabulary ({} words)", word, size());
}

const std::string& Vocabulary::word(std::int64_t id) const {
  if (id < 0 || id >= size()) fail("Vocabulary::word", "id {} is out of range [0, {})", id, size());
  return words_[static_cast<std::size_t>(id)];
}

std::string Vocabulary::to_text() const {
  std::string out;
  for (const std::string& w : words_) {
    out += w;
    out += '\n';
  }
  return out;
}

Vocabulary Vocabulary::from_text(std::string_view text, std::string_view source) {
  Vocabulary v;
  std::int64_t line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = std::min(text.find('\n', i), text.size());
    const std::string_view w = text.substr(i, end - i);
    if (w.empty()) fail("Vocabulary", "{}:{}: empty line (expected one word a line)", source, line);
    if (has_space(w)) fail("Vocabulary", "{}:{}: word '{}' contains whitespace", source, line, w);
    if (auto seen = v.find(w)) fail("Vocabulary", "{}:{}: word '{}' duplicates line {}", source, line, w, *seen + 1);
    v.add(w);
    ++line;
    i = end + 1;
  }
  if (v.size() == 0) fail("Vocabulary", "{}: no words (an empty vocabulary)", source);
  return v;
}

void Vocabulary::save(const std::filesystem::path& path) const {
  if (words_.empty()) fail("Vocabulary::save", "refusing to save an empty vocabulary to '{}'", path.string());
  write_file_atomically(path.string(), to_text());
}

std::string Vocabulary::fingerprint() const {
  const std::string text = to_text();
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
  return fmt::format("{} words, CRC-32 {:08x}", size(), static_cast<std::uint32_t>(crc));
}

Vocabulary Vocabulary::load(const std::filesystem::path& path) {
  return from_text(read_text_file(path, "Vocabulary::load"), path.string());
}

std::vector<std::int64_t> tokenize_file_growing(const std::filesystem::path& file, Vocabulary& vocab) {
  const std::string text = read_split(file, "Corpus");
  std::vector<std::int64_t> ids;
  // 5.2 to 5.7 bytes a token in PTB and WikiText: reserving for 4 never reallocates on them (a
  // reallocation of WikiText-103's 0.8 GB of ids would hold 2.4 GB at once).
  ids.reserve(text.size() / 4);
  for_each_token(
      text, [&](std::string_view w, std::int64_t) { ids.push_back(vocab.add(w)); },
      [&](std::int64_t) { ids.push_back(vocab.add(kEos)); });
  return ids;
}

std::vector<std::int64_t> tokenize_file(const std::filesystem::path& file, const Vocabulary& vocab) {
  const std::optional<std::int64_t> eos = vocab.find(kEos);
  if (!eos)
    fail("Corpus", "the vocabulary ({} words) has no '{}', needed to read '{}'", vocab.size(), kEos, file.string());
  const std::string text = read_split(file, "Corpus");
  std::vector<std::int64_t> ids;
  ids.reserve(text.size() / 4);
  for_each_token(
      text,
      [&](std::string_view w, std::int64_t line) {
        const std::optional<std::int64_t> id = vocab.find(w);
        if (!id)
          fail("Corpus", "{}:{}: word '{}' is not in the vocabulary ({} words, built on the training split)",
               file.string(), line, w, vocab.size());
        ids.push_back(*id);
      },
      [&](std::int64_t) { ids.push_back(*eos); });
  return ids;
}

namespace {

void check_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail("Corpus",
         "corpus folder '{}' does not exist (expected train/valid/test files in it; scripts/get-data fetches them)",
         dir.string());
}

}  // namespace

Corpus Corpus::load(const std::filesystem::path& dir, const CorpusFiles& files) {
  check_folder(dir);
  Corpus c;
  c.train = tokenize_file_growing(dir / files.train, c.vocab);
  c.valid = tokenize_file(dir / files.valid, c.vocab);
  c.test = tokenize_file(dir / files.test, c.vocab);
  return c;
}

Corpus Corpus::load(const std::filesystem::path& dir, Vocabulary vocab, const CorpusFiles& files) {
  check_folder(dir);
  Corpus c;
  c.vocab = std::move(vocab);
  c.train = tokenize_file(dir / files.train, c.vocab);
  c.valid = tokenize_file(dir / files.valid, c.vocab);
  c.test = tokenize_file(dir / files.test, c.vocab);
  return c;
}

CorpusFiles corpus_files_in(const std::filesystem::path& dir) {
  std::error_code ec;
  const CorpusFiles wiki{.train = "wiki.train.tokens", .valid = "wiki.valid.tokens", .test = "wiki.test.tokens"};
  if (!std::filesystem::exists(dir / CorpusFiles{}.train, ec) && std::filesystem::exists(dir / wiki.train, ec))
    return wiki;
  return {};
}

CachedCorpus load_corpus_cached(const std::filesystem::path& dir, const VocabularySource& vocab,
                                const std::filesystem::path& cache_file) {
  check_folder(dir);
  const CorpusFiles files = corpus_files_in(dir);
  const auto tokenise = [&] {
    if (vocab.fixed) return Corpus::load(dir, *vocab.fixed, files);
    return vocab.by_frequency ? Corpus::load(dir, files).by_frequency() : Corpus::load(dir, files);
  };
  if (cache_file.empty()) return {tokenise(), false};
  const std::string what = vocab.fixed ? "word corpus, vocabulary " + vocab.fixed->fingerprint()
                                       : std::string("word corpus, vocabulary built on train by ") +
                                             (vocab.by_frequency ? "frequency" : "first occurrence");
  const std::string key = id_cache_key(what, {dir / files.train, dir / files.valid, dir / files.test});
  if (auto cached = read_id_cache(cache_file, key); cached && cached->arrays.size() == 3) {
    CachedCorpus out;
    out.corpus.vocab = Vocabulary::from_text(cached->blob, cache_file.string());
    const std::int64_t n = out.corpus.vocab.size();
    for (const auto& a : cached->arrays)
      for (const std::int64_t id : a)
        if (id < 0 || id >= n)
          fail("Corpus", "the token-id cache {} holds id {} outside its {}-word vocabulary", cache_file.string(), id,
               n);
    out.corpus.train = std::move(cached->arrays[0]);
    out.corpus.valid = std::move(cached->arrays[1]);
    out.corpus.test = std::move(cached->arrays[2]);
    out.from_cache = true;
    return out;
  }
  CachedCorpus out{tokenise(), false};
  write_id_cache(cache_file, key, out.corpus.vocab.to_text(), {&out.corpus.train, &out.corpus.valid, &out.corpus.test});
  return out;
}

Corpus Corpus::by_frequency() const {
  std::vector<std::int64_t> count(static_cast<std::size_t>(vocab.size()), 0);
  for (const std::int64_t id : train) ++count[static_cast<std::size_t>(id)];
  std::vector<std::int64_t> order(count.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return count[static_cast<std::size_t>(a)] > count[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> new_id(order.size());
  Corpus c;
  for (std::size_t i = 0; i < order.size(); ++i) {
    new_id[static_cast<std::size_t>(order[i])] = static_cast<std::int64_t>(i);
    c.vocab.add(vocab.word(order[i]));
  }
  auto remap = [&](const std::vector<std::int64_t>& ids) {
    std::vector<std::int64_t> out(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) out[i] = new_id[static_cast<std::size_t>(ids[i])];
    return out;
  };
  c.train = remap(train);
  c.valid = remap(valid);
  c.test = remap(test);
  return c;
}

}  // namespace define::data
