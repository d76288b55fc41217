// Token-id caches (data/id_cache.h) of word corpora (data/corpus.h, load_corpus_cached) and
// parallel corpora (data/parallel_cache.h): a cached load equals a tokenising one; a changed
// source, another vocabulary source, a damaged or truncated cache file are never trusted (the text
// is tokenised again and the cache rewritten); WikiText's own file names are read.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/corpus.h"
#include "data/id_cache.h"
#include "data/parallel_cache.h"
#include "data/subword.h"
#include "support/common.h"
#include "support/corpora.h"

using namespace define;
using namespace define::data;
using Catch::Contains;
using define::test::TempDir;
namespace fs = std::filesystem;

namespace {

void write_corpus(const TempDir& d, const std::string& train_name = "train.txt") {
  d.write(train_name, "the cat sat\non the mat\nthe dog\n");
  d.write(train_name == "train.txt" ? "valid.txt" : "wiki.valid.tokens", "the cat\n");
  d.write(train_name == "train.txt" ? "test.txt" : "wiki.test.tokens", "the dog sat\n");
}

void check_same(const Corpus& a, const Corpus& b) {
  CHECK(a.vocab == b.vocab);
  CHECK(a.train == b.train);
  CHECK(a.valid == b.valid);
  CHECK(a.test == b.test);
}

// Makes the next write visibly newer (file times can be coarse).
void touch_later(const fs::path& p) { fs::last_write_time(p, fs::last_write_time(p) + std::chrono::seconds(2)); }

}  // namespace

TEST_CASE("id cache: a cached word corpus equals a tokenised one, and is rebuilt when it cannot be trusted",
          "[data][cache]") {
  const TempDir d;
  write_corpus(d);
  const fs::path cache = d.path() / ".define-cache" / "corpus-first.ids";
  const Corpus plain = Corpus::load(d.path());

  const CachedCorpus first = load_corpus_cached(d.path(), {}, cache);
  CHECK_FALSE(first.from_cache);
  REQUIRE(fs::exists(cache));
  const CachedCorpus second = load_corpus_cached(d.path(), {}, cache);
  CHECK(second.from_cache);
  check_same(second.corpus, plain);

  // Another vocabulary source does not read a cache keyed for the first one.
  const fs::path by_freq = d.path() / ".define-cache" / "corpus-frequency.ids";
  fs::copy_file(cache, by_freq);
  const CachedCorpus freq = load_corpus_cached(d.path(), {.by_frequency = true, .fixed = std::nullopt}, by_freq);
  CHECK_FALSE(freq.from_cache);
  check_same(freq.corpus, plain.by_frequency());
  CHECK(load_corpus_cached(d.path(), {.by_frequency = true, .fixed = std::nullopt}, by_freq).from_cache);
  const CachedCorpus fixed =
      load_corpus_cached(d.path(), {.by_frequency = false, .fixed = plain.by_frequency().vocab}, cache);
  CHECK_FALSE(fixed.from_cache);
  check_same(fixed.corpus, plain.by_frequency());

  // A changed training split: tokenised again, with the new words.
  load_corpus_cached(d.path(), {}, cache);
  d.write("train.txt", "the cat sat\non the mat\nthe dog ran\n");
  touch_later(d.path() / "train.txt");
  const CachedCorpus changed = load_corpus_cached(d.path(), {}, cache);
  CHECK_FALSE(changed.from_cache);
  CHECK(changed.corpus.vocab.contains("ran"));
  CHECK(load_corpus_cached(d.path(), {}, cache).from_cache);

  // One flipped bit anywhere, a truncation or trailing bytes: never read.
  std::string bytes;
  {
    std::ifstream in(cache, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const std::size_t at : {std::size_t{30}, bytes.size() / 2, bytes.size() - 6, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << bad;
    INFO("byte " << at);
    const CachedCorpus again = load_corpus_cached(d.path(), {}, cache);
    CHECK_FALSE(again.from_cache);
    check_same(again.corpus, changed.corpus);
  }
  std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 9);
  CHECK_FALSE(load_corpus_cached(d.path(), {}, cache).from_cache);
  std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes << "x";
  CHECK_FALSE(load_corpus_cached(d.path(), {}, cache).from_cache);
  CHECK(load_corpus_cached(d.path(), {}, cache).from_cache);  // and the rebuilt one is read

  // A cache that cannot be written (its folder is a file) is skipped, not an error.
  d.write("blocker", "x");
  const CachedCorpus unwritable = load_corpus_cached(d.path(), {}, d.path() / "blocker" / "c.ids");
  CHECK_FALSE(unwritable.from_cache);
  check_same(unwritable.corpus, changed.corpus);
}

TEST_CASE("id cache: WikiText's wiki.*.tokens names are read like train/valid/test.txt", "[data][cache]") {
  const TempDir plain, wiki;
  write_corpus(plain);
  write_corpus(wiki, "wiki.train.tokens");
  CHECK(corpus_files_in(wiki.path()).train == "wiki.train.tokens");
  CHECK(corpus_files_in(plain.path()).train == "train.txt");
  check_same(load_corpus_cached(wiki.path(), {}, {}).corpus, Corpus::load(plain.path()));
}

TEST_CASE("id cache: the values must fit the cache's int32", "[data][cache]") {
  const TempDir d;
  const std::vector<std::int64_t> big = {1, std::int64_t{1} << 40};
  CHECK_THROWS_WITH(write_id_cache(d.path() / "c.ids", "k", "", {&big}), Contains("outside the int32 range"));
  const std::vector<std::int64_t> fine = {-5, 7, 2147483647};
  REQUIRE(write_id_cache(d.path() / "c.ids", "k", "blob", {&fine, &fine}));
  const auto back = read_id_cache(d.path() / "c.ids", "k");
  REQUIRE(back);
  CHECK(back->blob == "blob");
  CHECK(back->arrays == std::vector<std::vector<std::int64_t>>{fine, fine});
  CHECK_FALSE(read_id_cache(d.path() / "c.ids", "other key"));
  CHECK_THROWS_WITH(id_cache_key("x", {d.path() / "missing.txt"}), Contains("missing.txt"));
}

TEST_CASE("id cache: a cached parallel corpus equals an encoded one", "[data][cache]") {
  const TempDir d;
  const std::vector<fs::path> bitext = define::test::write_made_up_bitext(d);
  SubwordOptions o;
  o.vocab_size = 300;
  const Subword sw = Subword::train(bitext, o, d.path() / "spm");
  const fs::path cache = d.path() / ".define-cache" / "p.ids";
  for (const std::int64_t max_len : {std::int64_t{0}, std::int64_t{12}}) {
    const ParallelData plain = load_parallel(bitext[0], bitext[1], sw, max_len);
    CHECK_FALSE(load_parallel_cached(bitext[0], bitext[1], sw, max_len, cache).from_cache);
    const CachedParallel cached = load_parallel_cached(bitext[0], bitext[1], sw, max_len, cache);
    CHECK(cached.from_cache);
    const ParallelData& c = cached.data;
    CHECK(c.src == plain.src);
    CHECK(c.tgt == plain.tgt);
    CHECK(c.line == plain.line);
    CHECK(c.lines == plain.lines);
    CHECK(c.skipped_too_long == plain.skipped_too_long);
    CHECK(c.skipped_empty == plain.skipped_empty);
    CHECK((c.pad_id == plain.pad_id && c.bos_id == plain.bos_id && c.eos_id == plain.eos_id));
    if (max_len == 12) CHECK(c.skipped_too_long > 0);
  }
  // A missing file is load_parallel's error, cache or not.
  CHECK_THROWS_WITH(load_parallel_cached(d.path() / "nope.de", bitext[1], sw, 0, cache), Contains("nope.de"));
}
