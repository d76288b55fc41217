// SentencePiece subword models (data/subword.h): training on made-up text written to a temporary
// folder (both files written atomically, fixed special ids, byte-identical retraining), encode /
// decode (round trip, special ids skipped, out-of-vocabulary ids refused) and the errors for bad
// input (missing, empty, non-UTF-8 training files; missing, empty, corrupt model files). When the
// shared Multi30k is found, a model trained on a slice of its train split round-trips every line
// of val.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/corpora.h"
#include "data/subword.h"
#include "data/text_lines.h"
#include "support/common.h"

using namespace define;
using namespace define::data;
using Catch::Contains;
using define::test::as_text;
using define::test::error_of;
using define::test::made_up_sentences;
using define::test::read_all;
using define::test::TempDir;
using define::test::write_made_up_bitext;
namespace fs = std::filesystem;

namespace {

SubwordOptions small(const std::string& type = "bpe") {
  SubwordOptions o;
  o.model_type = type;
  o.vocab_size = 300;
  return o;
}

// The first `n` lines of a file.
std::vector<std::string> head_lines(const fs::path& file, std::int64_t n) {
  TextLineReader in(file, "test");
  std::vector<std::string> out;
  for (std::string l; static_cast<std::int64_t>(out.size()) < n && in.next(l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("subword: training writes .model and .vocab with pad 0, unk 1, bos 2, eos 3", "[subword]") {
  TempDir d;
  const auto files = write_made_up_bitext(d);
  const Subword sw = Subword::train(files, small(), d.path() / "spm");
  CHECK(sw.size() == 300);
  CHECK(sw.pad_id() == 0);
  CHECK(sw.unk_id() == 1);
  CHECK(sw.bos_id() == 2);
  CHECK(sw.eos_id() == 3);
  CHECK(sw.piece(0) == "<pad>");
  CHECK(sw.piece(1) == "<unk>");
  CHECK(sw.piece(2) == "<s>");
  CHECK(sw.piece(3) == "</s>");

  // The .model holds exactly the model's bytes; the .vocab one "piece<TAB>score" line per id.
  CHECK(read_all(d.path() / "spm.model") == sw.bytes());
  const std::string vocab = read_all(d.path() / "spm.vocab");
  CHECK(std::count(vocab.begin(), vocab.end(), '\n') == 300);
  CHECK(vocab.rfind("<pad>\t0\n<unk>\t0\n<s>\t0\n</s>\t0\n", 0) == 0);
  // Only the two files: no temporaries of the atomic writes left behind.
  CHECK(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) == 4);

  // Loading gives the same model.
  const Subword again = Subword::load(d.path() / "spm.model");
  CHECK(again.fingerprint() == sw.fingerprint());
  CHECK_THAT(sw.fingerprint(), Catch::Matches("300 pieces, CRC-32 [0-9a-f]{8}"));
  const std::string line = made_up_sentences(1, 7, true)[0];
  CHECK(again.encode(line) == sw.encode(line));
}

TEST_CASE("subword: decode(encode(x)) == x for text the model covers, bpe and unigram", "[subword]") {
  TempDir d;
  const auto files = write_made_up_bitext(d);
  for (const std::string type : {"bpe", "unigram"}) {
    INFO(type);
    const Subword sw = Subword::train(files, small(type), d.path() / type);
    CHECK(sw.size() == 300);
    // Unseen sentences of the same made-up languages: same characters, new words.
    for (const auto& line : made_up_sentences(50, 9, true)) {
      const std::vector<std::int32_t> ids = sw.encode(line);
      REQUIRE(!ids.empty());
      CHECK(std::find(ids.begin(), ids.end(), sw.unk_id()) == ids.end());
      CHECK(sw.decode(ids) == line);
    }
    // SentencePiece drops outer spaces and collapses runs of them (remove_extra_whitespaces).
    CHECK(sw.decode(sw.encode("  ka  lo mi ")) == "ka lo mi");
    CHECK(sw.encode("").empty());
    CHECK(sw.encode("   ").empty());
  }
}

TEST_CASE("subword: training twice gives byte-identical files", "[subword]") {
  TempDir d;
  const auto files = write_made_up_bitext(d);
  for (const std::string type : {"bpe", "unigram"}) {
    INFO(type);
    const Subword a = Subword::train(files, small(type), d.path() / (type + "-a"));
    const Subword b = Subword::train(files, small(type), d.path() / (type + "-b"));
    CHECK(a.bytes() == b.bytes());
    CHECK(read_all(d.path() / (type + "-a.model")) == read_all(d.path() / (type + "-b.model")));
    CHECK(read_all(d.path() / (type + "-a.vocab")) == read_all(d.path() / (type + "-b.vocab")));
    CHECK(a.fingerprint() == b.fingerprint());
  }
  // Sampled input (400 of the 1,200 lines) is reproducible too, and a different model.
  SubwordOptions sampled = small();
  sampled.input_sentence_size = 400;
  const Subword s1 = Subword::train(files, sampled, d.path() / "s1");
  CHECK(Subword::train(files, sampled, d.path() / "s2").bytes() == s1.bytes());
  CHECK(s1.fingerprint() != Subword::load(d.path() / "bpe-a.model").fingerprint());
  // Different options make a different model (and fingerprint).
  SubwordOptions bigger = small();
  bigger.vocab_size = 301;
  CHECK(Subword::train(files, bigger, d.path() / "c").fingerprint() != Subword::load(d.path() / "bpe-a.model").fingerprint());
}

TEST_CASE("subword: special ids and unknown characters", "[subword]") {
  TempDir d;
  const Subword sw = Subword::train(write_made_up_bitext(d), small(), d.path() / "spm");
  const std::vector<std::int32_t> ids = sw.encode("ka lo.");
  std::vector<std::int32_t> framed = {sw.bos_id()};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {sw.eos_id(), sw.pad_id(), sw.pad_id()});
  // pad, bos and eos are skipped wherever they stand; int64 ids (a tensor's) decode the same.
  CHECK(sw.decode(framed) == "ka lo.");
  CHECK(sw.decode(std::vector<std::int64_t>(framed.begin(), framed.end())) == "ka lo.");
  CHECK(sw.decode(std::vector<std::int32_t>{sw.pad_id(), sw.eos_id()}).empty());
  CHECK(sw.decode({0, 3}).empty());  // a braced list picks the int32 overload

  // A character the training text never had ('Z', '€') becomes unk, shown as " ⁇ " on decoding.
  const std::vector<std::int32_t> with_unk = sw.encode("ka Z€ lo");
  CHECK(std::count(with_unk.begin(), with_unk.end(), sw.unk_id()) == 1);
  CHECK(sw.decode(with_unk) == "ka  ⁇  lo");

  CHECK_THAT(error_of([&] { sw.decode(std::vector<std::int32_t>{4, 300}); }),
             Contains("id 300 (position 1) is outside the vocabulary [0, 300)"));
  CHECK_THAT(error_of([&] { sw.decode(std::vector<std::int64_t>{-1}); }), Contains("id -1 (position 0)"));
  CHECK_THAT(error_of([&] { sw.piece(300); }), Contains("id 300 is outside the vocabulary"));
  CHECK_THAT(error_of([&] { sw.encode("ka \xff lo"); }), Contains("Subword::encode: invalid UTF-8 (byte 4"));
}

TEST_CASE("subword: byte_fallback spells unknown characters in bytes", "[subword]") {
  TempDir d;
  SubwordOptions o = small();
  o.vocab_size = 400;  // 256 byte pieces + the 4 special ones + the characters and merges
  o.byte_fallback = true;
  const Subword sw = Subword::train(write_made_up_bitext(d), o, d.path() / "spm");
  const std::vector<std::int32_t> ids = sw.encode("ka Z€ lo");
  CHECK(std::find(ids.begin(), ids.end(), sw.unk_id()) == ids.end());
  CHECK(sw.decode(ids) == "ka Z€ lo");
}

TEST_CASE("subword: training refuses bad files and options, naming them", "[subword]") {
  TempDir d;
  const auto files = write_made_up_bitext(d);
  const fs::path prefix = d.path() / "spm";
  CHECK_THAT(error_of([&] { Subword::train({}, small(), prefix); }), Contains("no training files"));
  CHECK_THAT(error_of([&] { Subword::train({files[0], d.path() / "nope.en"}, small(), prefix); }),
             Contains("nope.en' does not exist"));
  const fs::path empty = d.write("empty.en", "");
  CHECK_THAT(error_of([&] { Subword::train({files[0], empty}, small(), prefix); }),
             Contains("empty.en' is empty (0 bytes)"));
  // Latin-1 "ä" (0xe4) on line 3 of the second file.
  const fs::path latin1 = d.write("latin1.de", "ka lo\nmi\nk\xe4se\n");
  CHECK_THAT(error_of([&] { Subword::train({files[0], latin1}, small(), prefix); }),
             Contains("latin1.de:3: invalid UTF-8 (byte 2 of the line is 0xe4)"));
  CHECK_THAT(error_of([&] { Subword::train(files, small(), d.path() / "no-such-dir" / "spm"); }),
             Contains("no-such-dir' of model prefix"));

  SubwordOptions o = small();
  o.vocab_size = 4;
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("more than the 4 special pieces"));
  o = small();
  o.vocab_size = 100000;  // far more pieces than the text has: SentencePiece's own message
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("SentencePiece refused to train"));
  o = small("wordpiece");
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("SentencePiece refused to train"));
  o = small();
  o.normalization = "no_such_rule";
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("SentencePiece refused to train"));
  o = small();
  o.input_sentence_size = 50;
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("input_sentence_size must be 0"));
  o = small();
  o.threads = 0;
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("threads must be in [1, 128]"));
  o = small();
  o.character_coverage = 0;
  CHECK_THAT(error_of([&] { Subword::train(files, o, prefix); }), Contains("character_coverage must be in (0, 1]"));
  // Nothing was written by the refused trainings.
  CHECK(!fs::exists(d.path() / "spm.model"));
  CHECK(!fs::exists(d.path() / "spm.vocab"));
}

TEST_CASE("subword: loading refuses missing, empty and corrupt model files, naming them", "[subword]") {
  TempDir d;
  const Subword sw = Subword::train(write_made_up_bitext(d), small(), d.path() / "spm");
  CHECK_THAT(error_of([&] { Subword::load(d.path() / "nope.model"); }),
             Contains("Subword::load: model file '" + (d.path() / "nope.model").string() + "' does not exist"));
  CHECK_THAT(error_of([&] { Subword::load(d.path()); }), Contains("is a folder"));
  CHECK_THAT(error_of([&] { Subword::load(d.write("empty.model", "")); }), Contains("empty.model' is empty"));
  CHECK_THAT(error_of([&] { Subword::load(d.write("text.model", "not a model at all\n")); }),
             Contains("text.model' is not a valid SentencePiece model"));
  // The vocabulary file is not the model.
  CHECK_THAT(error_of([&] { Subword::load(d.path() / "spm.vocab"); }), Contains("spm.vocab' is not a valid SentencePiece"));
  const std::string& bytes = sw.bytes();
  CHECK_THAT(error_of([&] { Subword::load(d.write("half.model", bytes.substr(0, bytes.size() / 2))); }),
             Contains("half.model' is not a valid SentencePiece model"));
  // Damage anywhere either fails to load with the file's name or loads a model whose fingerprint
  // differs: never a crash, and never a silent stand-in for the original.
  for (std::size_t at = 0; at < bytes.size(); at += bytes.size() / 64 + 1) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    const fs::path p = d.write("flipped.model", bad);
    try {
      const Subword loaded = Subword::load(p);
      CHECK(loaded.fingerprint() != sw.fingerprint());
      (void)loaded.decode(loaded.encode("ka lo mi."));
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Contains("flipped.model"));
    }
  }
}

// Found by tests/fuzz/fuzz_subword (regression input piece-starts-with-nul): a unigram model whose
// piece starts with a NUL byte made SentencePiece's trie (darts-clone) throw its own exception
// through Subword::load, so `define translate` stopped with "internal error" instead of naming the
// damaged subword.model.
TEST_CASE("subword: a piece that starts with a NUL byte is refused as a damaged model, naming the file", "[subword]") {
  TempDir d;
  const Subword sw = Subword::train(write_made_up_bitext(d), small("unigram"), d.path() / "spm");
  // A piece of two or more bytes, found by its serialized record: tag 1, length, bytes, then the
  // score's tag (0x15).
  std::string bytes = sw.bytes();
  std::size_t at = std::string::npos;
  for (std::int32_t id = 4; id < sw.size() && at == std::string::npos; ++id) {
    const std::string p = sw.piece(id);
    if (p.size() < 2 || p.size() > 100) continue;
    const std::string record = std::string("\x0a") + static_cast<char>(p.size()) + p + "\x15";
    if (const std::size_t found = bytes.find(record); found != std::string::npos) at = found + 2;
  }
  REQUIRE(at != std::string::npos);
  bytes[at] = '\0';
  const fs::path damaged = d.write("subword.model", bytes);
  CHECK_THAT(error_of([&] { Subword::load(damaged); }),
             Contains("subword.model' is not a valid SentencePiece model: its pieces cannot be indexed"));
}

TEST_CASE("subword: a model trained on a Multi30k slice round-trips every val line", "[subword]") {
  const fs::path m30k = define::test::shared_corpus("multi30k", "train.de");
  if (m30k.empty()) {
    DEFINE_SKIP_TEST("no Multi30k in $DEFINE_DATA_DIR/multi30k or <repo>/../shared/data/multi30k");
  }
  TempDir d;
  const fs::path de = d.write("train.de", as_text(head_lines(m30k / "train.de", 3000)));
  const fs::path en = d.write("train.en", as_text(head_lines(m30k / "train.en", 3000)));
  SubwordOptions o;
  o.vocab_size = 1000;
  // byte_fallback: a character of val that the 3,000-line slice lacks still decodes exactly.
  o.byte_fallback = true;
  const Subword sw = Subword::train({de, en}, o, d.path() / "m30k");
  CHECK(sw.size() == 1000);
  for (const char* side : {"val.de", "val.en"}) {
    INFO(side);
    const std::vector<std::string> lines = head_lines(m30k / side, 1 << 30);
    CHECK(lines.size() == 1014);
    std::int64_t mismatches = 0, tokens = 0;
    for (const auto& line : lines) {
      const auto ids = sw.encode(line);
      tokens += static_cast<std::int64_t>(ids.size());
      if (sw.decode(ids) != line) ++mismatches;
    }
    CHECK(mismatches == 0);
    // Subwords, not characters: Multi30k val averages about 13 words a sentence.
    CHECK(tokens < 40 * 1014);
  }
}
