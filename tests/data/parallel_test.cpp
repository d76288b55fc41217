// Parallel text (data/parallel.h) and token-count batches (data/token_batches.h): reading
// line-aligned files (eos on both sides, empty and too-long pairs skipped and counted, line numbers
// kept; misaligned, empty and non-UTF-8 files refused with file and line), and the batcher's
// contract: the exact src / tgt_in / tgt_out layout on a hand-made example, every sentence once per
// epoch, every batch within max_tokens, a batch order that depends only on (seed, epoch), exact
// resumption from a saved position, and shards that split an epoch. When the shared Multi30k is
// found, its val split is read and batched at max_tokens 4096.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/corpora.h"
#include "data/parallel.h"
#include "data/subword.h"
#include "data/token_batches.h"
#include "support/common.h"

using namespace define;
using namespace define::data;
using Catch::Contains;
using define::test::error_of;
using define::test::TempDir;
using define::test::values;
namespace fs = std::filesystem;

namespace {

// A small BPE model of the made-up languages, trained once into its own folder.
const Subword& model() {
  static const TempDir dir;
  static const Subword sw = [] {
    SubwordOptions o;
    o.vocab_size = 300;
    return Subword::train(define::test::write_made_up_bitext(dir), o, dir.path() / "spm");
  }();
  return sw;
}

std::vector<std::int32_t> with_eos(std::vector<std::int32_t> ids) {
  ids.push_back(3);
  return ids;
}

// Hand-made data: sentence i has src_len[i] source and tgt_len[i] target tokens (eos included),
// source tokens 100 + i, target tokens 200 + i, each side ending with eos = 3.
ParallelData made_data(const std::vector<int>& src_len, const std::vector<int>& tgt_len) {
  ParallelData d;
  for (std::size_t i = 0; i < src_len.size(); ++i) {
    d.src.emplace_back(static_cast<std::size_t>(src_len[i] - 1), 100 + static_cast<std::int32_t>(i));
    d.tgt.emplace_back(static_cast<std::size_t>(tgt_len[i] - 1), 200 + static_cast<std::int32_t>(i));
    d.src.back().push_back(3);
    d.tgt.back().push_back(3);
    d.line.push_back(static_cast<std::int64_t>(i) + 1);
  }
  d.lines = static_cast<std::int64_t>(src_len.size());
  return d;
}

// n sentences with lengths 1..max_len drawn from a small LCG (deterministic).
ParallelData random_lengths(int n, int max_len, std::uint64_t seed) {
  std::uint64_t x = seed;
  const auto draw = [&] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1 + static_cast<int>((x >> 33) % static_cast<std::uint64_t>(max_len));
  };
  std::vector<int> s, t;
  for (int i = 0; i < n; ++i) {
    s.push_back(draw());
    t.push_back(draw());
  }
  return made_data(s, t);
}

// The ids of every batch of epoch `epoch`, in order.
std::vector<std::vector<std::int64_t>> epoch_ids(TokenBatcher& b, std::int64_t epoch) {
  b.start_epoch(epoch);
  std::vector<std::vector<std::int64_t>> out;
  while (auto batch = b.next()) out.push_back(batch->ids);
  return out;
}

std::vector<std::int64_t> ints(const Tensor& t) {
  const std::vector<double> v = values(t);
  return {v.begin(), v.end()};
}

}  // namespace

TEST_CASE("parallel: both sides encoded with eos, empty and too-long pairs skipped and counted", "[parallel]") {
  TempDir d;
  const Subword& sw = model();
  // Line 2 is empty on the target side, line 4 blank (spaces) on the source side, line 5 long;
  // the source has CRLF endings and no final newline.
  const fs::path src = d.write("s.de", "ka lo.\r\nmi tor.\r\nein der und.\r\n   \r\nka lo mi tor ein der und sch an ve ru.\r\nqu ox.");
  const fs::path tgt = d.write("s.en", "ka.\n\nmi.\nlo.\nka lo mi tor ein der und sch an ve ru.\nbi dam.\n");
  const ParallelData all = load_parallel(src, tgt, sw, 0);
  CHECK(all.lines == 6);
  CHECK(all.skipped_empty == 2);
  CHECK(all.skipped_too_long == 0);
  REQUIRE(all.size() == 4);
  CHECK(all.line == std::vector<std::int64_t>{1, 3, 5, 6});
  CHECK(all.src[0] == with_eos(sw.encode("ka lo.")));
  CHECK(all.tgt[0] == with_eos(sw.encode("ka.")));
  CHECK(all.src[3] == with_eos(sw.encode("qu ox.")));
  CHECK(all.tgt[3] == with_eos(sw.encode("bi dam.")));
  CHECK(all.pad_id == 0);
  CHECK(all.bos_id == 2);
  CHECK(all.eos_id == 3);

  // max_len counts eos: the long pair goes, a limit equal to the longest kept side keeps the rest.
  std::size_t longest = 0;
  for (std::size_t i : {0, 1, 3}) longest = std::max({longest, all.src[i].size(), all.tgt[i].size()});
  REQUIRE(all.src[2].size() > longest);
  const ParallelData capped = load_parallel(src, tgt, sw, static_cast<std::int64_t>(longest));
  CHECK(capped.lines == 6);
  CHECK(capped.skipped_empty == 2);
  CHECK(capped.skipped_too_long == 1);
  CHECK(capped.line == std::vector<std::int64_t>{1, 3, 6});
}

TEST_CASE("parallel: misaligned, empty, missing and non-UTF-8 files are refused with file and line", "[parallel]") {
  TempDir d;
  const Subword& sw = model();
  const fs::path three = d.write("three.de", "ka.\nlo.\nmi.\n");
  const fs::path two = d.write("two.en", "ka.\nlo.");
  const std::string msg = error_of([&] { load_parallel(three, two, sw, 0); });
  CHECK_THAT(msg, Contains("three.de") && Contains("two.en") && Contains("not line-aligned") &&
                      Contains("two.en' ends after line 2"));
  CHECK_THAT(error_of([&] { load_parallel(two, three, sw, 0); }), Contains("two.en' ends after line 2, '"));
  const fs::path empty = d.write("empty.en", "");
  CHECK_THAT(error_of([&] { load_parallel(three, empty, sw, 0); }), Contains("empty.en' is empty (0 bytes)"));
  CHECK_THAT(error_of([&] { load_parallel(d.path() / "nope.de", three, sw, 0); }), Contains("nope.de' does not exist"));
  const fs::path bad = d.write("bad.en", "ka.\nlo.\nm\xc3\x28.\n");
  CHECK_THAT(error_of([&] { load_parallel(three, bad, sw, 0); }), Contains("bad.en:3: invalid UTF-8 (byte 2"));
  CHECK_THAT(error_of([&] { load_parallel(three, three, sw, -1); }), Contains("max_len must be >= 0"));
}

TEST_CASE("token batches: exact padding, eos and bos layout", "[parallel]") {
  // Source lengths 3, 2, 3; target lengths 2, 4, 1 (eos included). Sorted by (src, tgt, index):
  // 1 (2,4), 2 (3,1), 0 (3,2). max_tokens 8: {1, 2} costs 2 * 4 = 8, adding 0 would cost 12.
  const ParallelData d = made_data({3, 2, 3}, {2, 4, 1});
  TokenBatcher b(d, 8, false, 0);
  REQUIRE(b.num_batches() == 2);
  CHECK(b.layout() == std::vector<std::vector<std::int64_t>>{{1, 2}, {0}});
  const auto first = b.next();
  REQUIRE(first);
  CHECK(first->ids == std::vector<std::int64_t>{1, 2});
  CHECK(first->src.shape() == Shape{3, 2});
  CHECK(first->tgt_in.shape() == Shape{4, 2});
  CHECK(first->tgt_out.shape() == Shape{4, 2});
  CHECK(first->src.dtype() == DType::Int64);
  // Time-first: row t holds token t of every column. Column 0 is sentence 1, column 1 sentence 2.
  CHECK(ints(first->src) == std::vector<std::int64_t>{101, 102,  //
                                                      3, 102,    //
                                                      0, 3});
  CHECK(ints(first->tgt_in) == std::vector<std::int64_t>{2, 2,    // bos
                                                         201, 0,  //
                                                         201, 0,  //
                                                         201, 0});
  CHECK(ints(first->tgt_out) == std::vector<std::int64_t>{201, 3,  //
                                                          201, 0,  //
                                                          201, 0,  //
                                                          3, 0});
  CHECK(first->src_tokens == 5);
  CHECK(first->tgt_tokens == 5);
  const auto second = b.next();
  REQUIRE(second);
  CHECK(ints(second->src) == std::vector<std::int64_t>{100, 100, 3});
  CHECK(ints(second->tgt_in) == std::vector<std::int64_t>{2, 200});
  CHECK(ints(second->tgt_out) == std::vector<std::int64_t>{200, 3});
  CHECK(!b.next());
  CHECK(!b.next());  // stays at the end until the next epoch starts
  CHECK(b.position() == 2);
}

TEST_CASE("token batches: every sentence once per epoch, every batch within max_tokens", "[parallel]") {
  const ParallelData d = random_lengths(500, 40, 7);
  for (std::int64_t max_tokens : {40, 100, 333, 4096}) {
    INFO("max_tokens " << max_tokens);
    TokenBatcher b(d, max_tokens, true, 11);
    for (std::int64_t epoch : {0, 3}) {
      b.start_epoch(epoch);
      std::vector<int> seen(500, 0);
      std::int64_t batches = 0;
      while (auto batch = b.next()) {
        ++batches;
        const std::int64_t B = batch->src.size(1);
        CHECK(B * std::max(batch->src.size(0), batch->tgt_out.size(0)) <= max_tokens);
        CHECK(static_cast<std::int64_t>(batch->ids.size()) == B);
        std::int64_t src_tokens = 0, tgt_tokens = 0;
        for (std::int64_t i : batch->ids) {
          ++seen[static_cast<std::size_t>(i)];
          src_tokens += static_cast<std::int64_t>(d.src[static_cast<std::size_t>(i)].size());
          tgt_tokens += static_cast<std::int64_t>(d.tgt[static_cast<std::size_t>(i)].size());
        }
        CHECK(batch->src_tokens == src_tokens);
        CHECK(batch->tgt_tokens == tgt_tokens);
        const std::vector<std::int64_t> s = ints(batch->src), t = ints(batch->tgt_out);
        CHECK(std::count(s.begin(), s.end(), 0) == static_cast<std::int64_t>(s.size()) - src_tokens);
        CHECK(std::count(t.begin(), t.end(), 0) == static_cast<std::int64_t>(t.size()) - tgt_tokens);
      }
      CHECK(batches == b.num_batches());
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
  // Greedy cutting in sorted order leaves no batch that could have taken the next sentence: each
  // batch's successor's first sentence would overflow it (checked on the layout).
  TokenBatcher b(d, 333, false, 0);
  const auto& layout = b.layout();
  for (std::size_t k = 0; k + 1 < layout.size(); ++k) {
    std::size_t longest = 0;
    for (std::int64_t i : layout[k]) longest = std::max({longest, d.src[i].size(), d.tgt[i].size()});
    const std::int64_t n = layout[k + 1][0];
    longest = std::max({longest, d.src[n].size(), d.tgt[n].size()});
    CHECK(static_cast<std::int64_t>((layout[k].size() + 1) * longest) > 333);
  }
}

TEST_CASE("token batches: the order depends only on (seed, epoch), no shuffle keeps the layout", "[parallel]") {
  const ParallelData d = random_lengths(400, 30, 3);
  TokenBatcher a(d, 120, true, 42), b(d, 120, true, 42), c(d, 120, true, 43), plain(d, 120, false, 42);
  REQUIRE(a.num_batches() > 20);
  const auto a0 = epoch_ids(a, 0), a1 = epoch_ids(a, 1);
  CHECK(epoch_ids(b, 1) == a1);  // another batcher, epochs visited in another order
  CHECK(epoch_ids(b, 0) == a0);
  CHECK(epoch_ids(a, 0) == a0);  // revisiting an epoch
  CHECK(a0 != a1);
  CHECK(epoch_ids(c, 0) != a0);
  // Shuffled orders are permutations of the same batches.
  auto sorted0 = a0, sorted1 = a1;
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  CHECK(sorted0 == sorted1);
  CHECK(epoch_ids(plain, 0) == plain.layout());
  CHECK(epoch_ids(plain, 5) == plain.layout());
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint() == plain.fingerprint());  // the layout, not the order
  CHECK(TokenBatcher(d, 121, true, 42).fingerprint() != a.fingerprint());
  CHECK_THAT(a.fingerprint(), Catch::Matches("400 sentences, [0-9]+ batches, max_tokens 120, CRC-32 [0-9a-f]{8}"));
}

TEST_CASE("token batches: set_position resumes with exactly the same batches", "[parallel]") {
  const ParallelData d = random_lengths(300, 25, 5);
  TokenBatcher a(d, 100, true, 9);
  a.start_epoch(2);
  for (int i = 0; i < 7; ++i) REQUIRE(a.next());
  const std::int64_t epoch = a.epoch(), pos = a.position();
  CHECK(epoch == 2);
  CHECK(pos == 7);
  std::vector<std::vector<std::int64_t>> rest;
  std::vector<std::vector<std::int64_t>> rest_tokens;
  while (auto batch = a.next()) {
    rest.push_back(batch->ids);
    rest_tokens.push_back(ints(batch->tgt_in));
  }
  TokenBatcher b(d, 100, true, 9);  // a fresh process: same data, same settings
  b.set_position(epoch, pos);
  for (std::size_t k = 0; k < rest.size(); ++k) {
    const auto batch = b.next();
    REQUIRE(batch);
    CHECK(batch->ids == rest[k]);
    CHECK(ints(batch->tgt_in) == rest_tokens[k]);
  }
  CHECK(!b.next());
  // The end of an epoch is a valid position too; anything past it is not.
  b.set_position(2, b.num_batches());
  CHECK(!b.next());
  CHECK_THAT(error_of([&] { b.set_position(2, b.num_batches() + 1); }), Contains("outside [0, "));
  CHECK_THAT(error_of([&] { b.set_position(-1, 0); }), Contains("epoch must be >= 0"));
}

TEST_CASE("token batches: shards split an epoch's order between ranks", "[parallel]") {
  const ParallelData d = random_lengths(300, 25, 8);
  TokenBatcher whole(d, 100, true, 4);
  const auto all = epoch_ids(whole, 1);
  std::vector<std::vector<std::int64_t>> merged(all.size());
  for (int rank = 0; rank < 3; ++rank) {
    TokenBatcher part(d, 100, true, 4);
    part.shard(rank, 3);
    const auto mine = epoch_ids(part, 1);
    CHECK(static_cast<std::int64_t>(mine.size()) == part.num_batches());
    for (std::size_t k = 0; k < mine.size(); ++k) merged[k * 3 + static_cast<std::size_t>(rank)] = mine[k];
  }
  CHECK(merged == all);
  CHECK_THAT(error_of([&] { whole.shard(3, 3); }), Contains("rank 3 of world 3"));
}

TEST_CASE("token batches: refuses a sentence longer than max_tokens, naming it, and empty data", "[parallel]") {
  const ParallelData d = made_data({3, 9, 2}, {2, 4, 1});
  CHECK_THAT(error_of([&] { TokenBatcher(d, 8, false, 0); }),
             Contains("sentence 1 (line 2) has 9 source and 4 target tokens, more than max_tokens 8"));
  CHECK_THAT(error_of([&] { TokenBatcher(d, 0, false, 0); }), Contains("max_tokens must be at least 1"));
  const ParallelData none;
  CHECK_THAT(error_of([&] { TokenBatcher(none, 100, false, 0); }), Contains("no sentences"));
  // A single sentence exactly at the limit fits, alone.
  TokenBatcher one(d, 9, false, 0);
  CHECK(one.layout().back() == std::vector<std::int64_t>{1});
}

TEST_CASE("parallel: Multi30k val read and batched at max_tokens 4096", "[parallel]") {
  const fs::path m30k = define::test::shared_corpus("multi30k", "val.de");
  if (m30k.empty()) {
    DEFINE_SKIP_TEST("no Multi30k in $DEFINE_DATA_DIR/multi30k or <repo>/../shared/data/multi30k");
  }
  TempDir dir;
  SubwordOptions o;
  o.vocab_size = 1000;
  o.byte_fallback = true;  // trained on val itself here: just a model that covers it
  const Subword sw = Subword::train({m30k / "val.de", m30k / "val.en"}, o, dir.path() / "spm");
  const ParallelData d = load_parallel(m30k / "val.de", m30k / "val.en", sw, 0);
  CHECK(d.lines == 1014);
  CHECK(d.size() == 1014);
  CHECK(d.skipped_empty == 0);
  TokenBatcher b(d, 4096, false, 0);
  std::set<std::int64_t> seen;
  while (auto batch = b.next()) {
    CHECK(batch->src.size(1) * std::max(batch->src.size(0), batch->tgt_out.size(0)) <= 4096);
    seen.insert(batch->ids.begin(), batch->ids.end());
  }
  CHECK(seen.size() == 1014);
}
