// Word-level corpora (data/corpus.h): tokenisation with <eos> per line, the first-occurrence
// vocabulary order of the PyTorch word_language_model example, vocabulary files, and the errors for
// bad data (missing folder or file, empty split, out-of-vocabulary word with file:line). Tiny
// corpora are written to a temporary folder; the real PTB train split is checked against the
// counts in shared/data/README.md when the shared folder exists, and scripts/get-data's offline path
// (find + SHA-256) is run on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "support/runs.h"
#include "core/error.h"
#include "data/corpus.h"
#include "support/corpora.h"
#include "support/common.h"

using namespace define;
using namespace define::data;
using Catch::Contains;
using define::test::error_of;
using define::test::repo_root;
using define::test::shared_corpus;
using define::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Three lines of train, one of them blank: 12 tokens, vocabulary in first-occurrence order
//   the=0 cat=1 sat=2 <eos>=3 dog=4 <unk>=5 down=6.
// Tabs and repeated spaces separate words too.
const std::string kTrain = " the cat sat\n the\tdog\n\n <unk>  sat down \n";
const std::vector<std::int64_t> kTrainIds = {0, 1, 2, 3, 0, 4, 3, 3, 5, 2, 6, 3};
const std::vector<std::string> kVocab = {"the", "cat", "sat", "<eos>", "dog", "<unk>", "down"};

void write_corpus(const TempDir& d, const std::string& valid, const std::string& test) {
  d.write("train.txt", kTrain);
  d.write("valid.txt", valid);
  d.write("test.txt", test);
}

fs::path shared_ptb() { return shared_corpus("ptb"); }

}  // namespace

TEST_CASE("corpus: tokens, <eos> per line, first-occurrence vocabulary", "[data]") {
  TempDir d;
  // valid reuses train's words; test has a CRLF line ending and no final newline.
  write_corpus(d, "the dog sat\n", "down\r\n cat");
  const Corpus c = Corpus::load(d.path());
  CHECK(c.vocab.words() == kVocab);
  CHECK(c.vocab.size() == 7);
  CHECK(c.train == kTrainIds);
  CHECK(c.valid == std::vector<std::int64_t>{0, 4, 2, 3});
  CHECK(c.test == std::vector<std::int64_t>{6, 3, 1, 3});
  // <unk> is an ordinary word and <eos> ends every line, the blank one included.
  CHECK(c.vocab.id("<unk>") == 5);
  CHECK(std::count(c.train.begin(), c.train.end(), c.vocab.id("<eos>")) == 4);
}

TEST_CASE("corpus: by_frequency orders ids by train frequency, ties by first occurrence", "[data]") {
  TempDir d;
  write_corpus(d, "the dog sat\n", "down\r\n cat");
  const Corpus c = Corpus::load(d.path()).by_frequency();
  // Counts in train: <eos> 4, the 2, sat 2, then cat, dog, <unk>, down once each.
  CHECK(c.vocab.words() == std::vector<std::string>{"<eos>", "the", "sat", "cat", "dog", "<unk>", "down"});
  CHECK(c.train == std::vector<std::int64_t>{1, 3, 2, 0, 1, 4, 0, 0, 5, 2, 6, 0});
  CHECK(c.valid == std::vector<std::int64_t>{1, 4, 2, 0});
  CHECK(c.test == std::vector<std::int64_t>{6, 0, 3, 0});
  // The same ids as reading the splits against the reordered vocabulary (what eval does).
  const Corpus again = Corpus::load(d.path(), c.vocab);
  CHECK(again.train == c.train);
  CHECK(again.test == c.test);
}

TEST_CASE("corpus: a fixed vocabulary reads every split against it", "[data]") {
  TempDir d;
  write_corpus(d, "the dog sat\n", "cat\n");
  // A vocabulary in another order: ids follow it, not the order of the files.
  Vocabulary v;
  for (const char* w : {"<eos>", "down", "<unk>", "dog", "sat", "cat", "the", "extra"}) v.add(w);
  const Corpus c = Corpus::load(d.path(), v);
  CHECK(c.vocab == v);
  CHECK(c.train == std::vector<std::int64_t>{6, 5, 4, 0, 6, 3, 0, 0, 2, 4, 1, 0});
  CHECK(c.valid == std::vector<std::int64_t>{6, 3, 4, 0});
  CHECK(c.test == std::vector<std::int64_t>{5, 0});

  // A train word missing from a given vocabulary is an error too, naming file and line.
  Vocabulary small;
  for (const char* w : {"<eos>", "the", "cat", "sat", "dog"}) small.add(w);
  const std::string msg = error_of([&] { Corpus::load(d.path(), small); });
  CHECK_THAT(msg, Contains((d.path() / "train.txt").string() + ":4: word '<unk>' is not in the vocabulary"));

  Vocabulary no_eos;
  for (const std::string& w : kVocab)
    if (w != "<eos>") no_eos.add(w);
  CHECK_THAT(error_of([&] { Corpus::load(d.path(), no_eos); }), Contains("has no '<eos>'"));
}

TEST_CASE("corpus: out-of-vocabulary word in valid/test names file and line", "[data]") {
  TempDir d;
  write_corpus(d, "the\ncat\n\nthe zebra sat\n", "the\n");
  const std::string msg = error_of([&] { Corpus::load(d.path()); });
  CHECK_THAT(msg, Contains((d.path() / "valid.txt").string() + ":4: word 'zebra' is not in the vocabulary (7 words"));

  write_corpus(d, "the\n", "dog\ndog cat\n sat gnu\n");
  CHECK_THAT(error_of([&] { Corpus::load(d.path()); }),
             Contains((d.path() / "test.txt").string() + ":3: word 'gnu'"));
}

TEST_CASE("corpus: missing folder, missing file and empty split are errors", "[data]") {
  TempDir d;
  CHECK_THAT(error_of([&] { Corpus::load(d.path() / "nope"); }),
             Contains("corpus folder '" + (d.path() / "nope").string() + "' does not exist"));

  d.write("train.txt", kTrain);
  d.write("valid.txt", "the\n");
  CHECK_THAT(error_of([&] { Corpus::load(d.path()); }),
             Contains("file '" + (d.path() / "test.txt").string() + "' does not exist"));

  d.write("test.txt", "");
  CHECK_THAT(error_of([&] { Corpus::load(d.path()); }),
             Contains("split '" + (d.path() / "test.txt").string() + "' is empty"));
  d.write("test.txt", "the\n");
  d.write("train.txt", "");
  CHECK_THAT(error_of([&] { Corpus::load(d.path()); }),
             Contains("split '" + (d.path() / "train.txt").string() + "' is empty"));

  // Other file names (Multi30k's val.en etc.) through CorpusFiles.
  d.write("train.txt", kTrain);
  d.write("val.en", "the cat\n");
  const Corpus c = Corpus::load(d.path(), CorpusFiles{.train = "train.txt", .valid = "val.en", .test = "test.txt"});
  CHECK(c.valid == std::vector<std::int64_t>{0, 1, 3});
}

TEST_CASE("vocabulary: lookups, save/load round trip and bad files", "[data]") {
  Vocabulary v;
  CHECK(v.add("b") == 0);
  CHECK(v.add("a") == 1);
  CHECK(v.add("b") == 0);
  CHECK(v.add("<eos>") == 2);
  CHECK(v.size() == 3);
  CHECK(v.word(1) == "a");
  CHECK(v.find("zz") == std::nullopt);
  CHECK_THAT(error_of([&] { v.id("zz"); }), Contains("word 'zz' is not in the vocabulary (3 words)"));
  CHECK_THAT(error_of([&] { v.word(3); }), Contains("id 3 is out of range [0, 3)"));
  CHECK_THAT(error_of([&] { v.add("a b"); }), Contains("contains whitespace"));
  CHECK_THAT(error_of([&] { v.add(""); }), Contains("empty word"));

  TempDir d;
  const fs::path file = d.path() / "vocab.txt";
  v.save(file);
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "b\na\n<eos>\n");
  CHECK(Vocabulary::load(file) == v);
  for (const auto& e : fs::directory_iterator(d.path()))  // no temporary left behind
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);

  // The tiny corpus's vocabulary survives a round trip with ids unchanged.
  write_corpus(d, "the\n", "the\n");
  const Corpus c = Corpus::load(d.path());
  c.vocab.save(file);
  const Vocabulary back = Vocabulary::load(file);
  CHECK(back.words() == kVocab);
  CHECK(Corpus::load(d.path(), back).train == kTrainIds);

  // Bad vocabulary files: the error names the file and line.
  const std::string f = file.string();
  d.write("vocab.txt", "a\nb\na\n");
  CHECK_THAT(error_of([&] { Vocabulary::load(file); }), Contains(f + ":3: word 'a' duplicates line 1"));
  d.write("vocab.txt", "a\n\nb\n");
  CHECK_THAT(error_of([&] { Vocabulary::load(file); }), Contains(f + ":2: empty line"));
  d.write("vocab.txt", "a\nb c\n");
  CHECK_THAT(error_of([&] { Vocabulary::load(file); }), Contains(f + ":2: word 'b c' contains whitespace"));
  d.write("vocab.txt", "");
  CHECK_THAT(error_of([&] { Vocabulary::load(file); }), Contains(f + ": no words"));
  CHECK_THAT(error_of([&] { Vocabulary::load(d.path() / "missing.txt"); }), Contains("does not exist"));
  // A last word without its newline is accepted.
  CHECK(Vocabulary::from_text("x\ny", "<text>").words() == std::vector<std::string>{"x", "y"});
}

TEST_CASE("corpus: real PTB (929,589 train tokens, 10,000 words)", "[data]") {
  const fs::path ptb = shared_ptb();
  if (ptb.empty()) {
    DEFINE_SKIP_TEST("no PTB in $DEFINE_DATA_DIR/ptb or <repo>/../shared/data/ptb");
  }
  const Corpus c = Corpus::load(ptb);
  CHECK(c.train.size() == 929'589);
  CHECK(c.valid.size() == 73'760);
  CHECK(c.test.size() == 82'430);
  CHECK(c.vocab.size() == 10'000);
  // One <eos> a line (42,068 lines) and 45,020 <unk> (shared/data/README.md).
  const std::int64_t eos = c.vocab.id("<eos>"), unk = c.vocab.id("<unk>");
  CHECK(std::count(c.train.begin(), c.train.end(), eos) == 42'068);
  CHECK(std::count(c.train.begin(), c.train.end(), unk) == 45'020);
  // The first line has 24 words (" aer banknote ... wachter"), so <eos> is id 24, as in the
  // PyTorch example's Dictionary.
  CHECK(c.vocab.word(0) == "aer");
  CHECK(eos == 24);
  CHECK(c.vocab.word(23) == "wachter");
}

TEST_CASE("corpus: real WikiText-2 (2,088,628 train tokens, 33,278 words)", "[data]") {
  const fs::path wt2 = shared_corpus("wikitext-2");
  if (wt2.empty()) {
    DEFINE_SKIP_TEST("no WikiText-2 in $DEFINE_DATA_DIR/wikitext-2 or <repo>/../shared/data/wikitext-2");
  }
  // Blank lines are " \n" there: each gives a lone <eos>.
  const Corpus c = Corpus::load(wt2);
  CHECK(c.train.size() == 2'088'628);
  CHECK(c.valid.size() == 217'646);
  CHECK(c.test.size() == 245'569);
  CHECK(c.vocab.size() == 33'278);
  CHECK(std::count(c.train.begin(), c.train.end(), c.vocab.id("<eos>")) == 36'718);
  CHECK(std::count(c.train.begin(), c.train.end(), c.vocab.id("<unk>")) == 54'625);
}

TEST_CASE("scripts/get-data: offline path finds and verifies the shared PTB", "[data]") {
  const fs::path ptb = shared_ptb();
  const fs::path root = repo_root();
  if (ptb.empty() || root.empty()) {
    DEFINE_SKIP_TEST("no shared PTB or no repository checkout to run scripts/get-data from");
  }
  const std::string script = (root / "scripts" / "get-data").string();
  const auto [rc, out] = define::test::run_command("'" + script + "' --offline ptb 2>/dev/null");
  CHECK(rc == 0);
  CHECK(fs::equivalent(fs::path(out.substr(0, out.find('\n'))), ptb));
  const auto [bad_rc, bad_out] = define::test::run_command("'" + script + "' --offline no-such-corpus 2>/dev/null");
  CHECK(bad_rc != 0);
  CHECK(bad_out.empty());
}
