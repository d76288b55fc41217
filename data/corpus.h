// Word-level language-modelling corpora in the PTB / WikiText layout: a folder holding
// train.txt, valid.txt and test.txt, one sentence a line, tokens separated by whitespace.
//
// Tokenisation is the one AWD-LSTM and the PyTorch word_language_model example use
// (`line.split() + ['<eos>']`): every line, blank ones included, gives its whitespace-separated
// words followed by one "<eos>". Words are split on ASCII whitespace (space, \t, \r, \v, \f), lines
// on '\n'; a last line without its '\n' still counts. "<unk>" is an ordinary word (PTB and WikiText
// already replaced rare words by it). With these rules PTB train is 929,589 tokens and a 10,000-word
// vocabulary, WikiText-2 train 2,088,628 tokens and 33,278 words (shared/data/README.md).
//
// The vocabulary is built on train only, ids in order of first occurrence (so "<eos>" gets the id
// after the first line's new words), which is exactly the order of the PyTorch example's
// Dictionary: ids match a model trained by the reference code. Valid and test are read against that
// vocabulary; a word it lacks is an error naming the file and line (the standard files have none),
// never a silent <unk>.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace define::data {

inline constexpr std::string_view kEos = "<eos>";
inline constexpr std::string_view kUnk = "<unk>";

// word <-> id. Saved with a model as a plain text file, one word per line, line i = id i.
class Vocabulary {
 public:
  Vocabulary() = default;

  // Adds `word` if new (id = size() before the call); returns its id either way.
  // Refuses an empty word or one containing whitespace (it could not survive a save).
  std::int64_t add(std::string_view word);
  // The id of a word, or nullopt when it is not in the vocabulary.
  std::optional<std::int64_t> find(std::string_view word) const;
  // The id of a word; throws naming the word when it is missing.
  std::int64_t id(std::string_view word) const;
  bool contains(std::string_view word) const { return find(word).has_value(); }
  // The word of an id; throws naming the id and the size when out of range.
  const std::string& word(std::int64_t id) const;
  std::int64_t size() const { return static_cast<std::int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }
  bool operator==(const Vocabulary& other) const { return words_ == other.words_; }

  // Text form: each word followed by '\n', in id order.
  std::string to_text() const;
  // "<words> words, CRC-32 <8 hex digits of to_text()>": recorded in checkpoints, so a vocab.txt
  // that was edited or damaged after training is refused instead of mapping ids to wrong words.
  std::string fingerprint() const;
  // Parses the text form. `source` names the origin in errors ("vocab.txt:17: ..."). Refuses an
  // empty vocabulary, an empty line, a word with whitespace inside, and a duplicate (naming both
  // lines). A missing final '\n' is accepted.
  static Vocabulary from_text(std::string_view text, std::string_view source);

  // Written atomically (temporary file + rename) so an interrupted save keeps the old file.
  void save(const std::filesystem::path& path) const;
  // Refuses a missing or unreadable file, and everything from_text refuses.
  static Vocabulary load(const std::filesystem::path& path);

 private:
  // Transparent hashing: lookups by string_view without building a std::string.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> words_;
  std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>> ids_;
};

// One split as ids. Reading a file: refuses a missing or unreadable file and an empty one (zero
// bytes: no line at all) with the path in the message.
//
// Grows `vocab` with every new word of the file (used for train).
std::vector<std::int64_t> tokenize_file_growing(const std::filesystem::path& file, Vocabulary& vocab);
// Reads against a fixed vocabulary: a word it lacks throws "<file>:<line>: word '<w>' is not in
// the vocabulary ...". The vocabulary must hold "<eos>".
std::vector<std::int64_t> tokenize_file(const std::filesystem::path& file, const Vocabulary& vocab);

// The three file names of a corpus folder (Multi30k-style names can be passed in).
struct CorpusFiles {
  std::string train = "train.txt";
  std::string valid = "valid.txt";
  std::string test = "test.txt";
};

struct Corpus {
  Vocabulary vocab;
  std::vector<std::int64_t> train, valid, test;

  // Builds the vocabulary on <dir>/train.txt, then reads valid and test against it. Refuses a
  // missing folder, a missing or empty file, and an out-of-vocabulary word in valid/test.
  static Corpus load(const std::filesystem::path& dir, const CorpusFiles& files = {});
  // Reads all three splits against a given vocabulary (e.g. the one saved with a model): an
  // out-of-vocabulary word in any split, train included, is an error naming file and line.
  static Corpus load(const std::filesystem::path& dir, Vocabulary vocab, const CorpusFiles& files = {});

  // The same corpus with ids ordered by descending frequency in train (ties keep the order of
  // first occurrence): what an adaptive input or softmax needs, whose bands are id ranges meant
  // to hold the frequent words first (Transformer-XL and fairseq count their vocabularies so).
  Corpus by_frequency() const;
};

// The files of a corpus folder: train.txt, valid.txt and test.txt, or WikiText's own names
// wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens when the folder has those instead.
CorpusFiles corpus_files_in(const std::filesystem::path& dir);

// How a cached load builds its vocabulary: on train in order of first occurrence, on train by
// frequency (Corpus::by_frequency), or a given one (a resumed or fine-tuned run's vocab.txt).
struct VocabularySource {
  bool by_frequency = false;
  std::optional<Vocabulary> fixed;
};

struct CachedCorpus {
  Corpus corpus;
  bool from_cache = false;  // read from the cache (else tokenised, and the cache written)
};

// Corpus::load of `dir` (corpus_files_in) through the token-id cache `cache_file`
// (data/id_cache.h): the vocabulary and the three splits' ids are read from it when it matches the
// files and the vocabulary source, otherwise the text is tokenised and the cache (re)written. An
// empty cache_file tokenises without a cache.
CachedCorpus load_corpus_cached(const std::filesystem::path& dir, const VocabularySource& vocab,
                                const std::filesystem::path& cache_file);

}  // namespace define::data
