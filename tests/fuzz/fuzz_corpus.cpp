// Fuzz target: the corpus reader and the vocabulary file (data/corpus.h: train.txt / valid.txt /
// test.txt of a corpus folder, a run's vocab.txt).
//
// Input: NUL-separated parts: a vocabulary file's text, then train, valid and test texts (missing
// parts are missing files). The vocabulary is parsed (Vocabulary::from_text); the splits are
// written to a scratch corpus folder and loaded twice, building the vocabulary on train
// (Corpus::load) and against the parsed one (as `define eval` does). Properties checked on what is
// accepted: a vocabulary survives its text form, every id is in range, and by_frequency() keeps
// the corpus's words.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "fuzz_util.h"

namespace {

using define::data::Corpus;
using define::data::Vocabulary;
using define::fuzz::check;
using define::fuzz::expect_define_error;

void check_ids(const std::vector<std::int64_t>& ids, const Vocabulary& vocab) {
  for (const std::int64_t id : ids) check(id >= 0 && id < vocab.size(), "a token id is out of the vocabulary's range");
}

void check_corpus(const Corpus& c) {
  check_ids(c.train, c.vocab);
  check_ids(c.valid, c.vocab);
  check_ids(c.test, c.vocab);
  const Corpus f = c.by_frequency();
  check(f.vocab.size() == c.vocab.size() && f.train.size() == c.train.size(), "by_frequency changed the corpus's size");
  for (std::size_t i = 0; i < c.train.size(); ++i)
    check(f.vocab.word(f.train[i]) == c.vocab.word(c.train[i]), "by_frequency changed a word of train");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> parts = define::fuzz::split(data, size);
  std::optional<Vocabulary> vocab;
  if (expect_define_error([&] { vocab = Vocabulary::from_text(parts[0], "vocab.txt"); })) {
    std::optional<Vocabulary> again;
    check(expect_define_error([&] { again = Vocabulary::from_text(vocab->to_text(), "<to_text>"); }) && *again == *vocab,
          "a vocabulary does not survive its text form");
  }

  const std::filesystem::path dir = define::fuzz::scratch_dir() / "corpus";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  const char* const names[] = {"train.txt", "valid.txt", "test.txt"};
  for (std::size_t i = 0; i < 3 && i + 1 < parts.size(); ++i)
    define::fuzz::write_scratch(std::string("corpus/") + names[i], parts[i + 1]);

  expect_define_error([&] { check_corpus(Corpus::load(dir)); });
  if (vocab) expect_define_error([&] { check_corpus(Corpus::load(dir, *vocab)); });
  return 0;
}
