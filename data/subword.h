// Subword vocabularies for machine translation: a SentencePiece model (Kudo & Richardson 2018;
// the library Debian ships as libsentencepiece), trained jointly on both languages, as the
// DeLighT / fairseq NMT setups share one vocabulary between source and target.
//
// Training settings that differ from SentencePiece's defaults, and why:
//   - special ids fixed at pad = 0, unk = 1, bos = 2, eos = 3 (SentencePiece has no pad by default
//     and puts unk at 0), so the batcher and the model can rely on them;
//   - normalization "identity" by default: the model sees the raw text, and decode(encode(x)) == x
//     for every line of text whose characters the model covers (character_coverage 1.0 covers all
//     of train). SentencePiece's default, "nmt_nfkc", would rewrite e.g. a no-break space (there
//     are some in Multi30k train.de) or full-width forms, so decoded output would no longer match
//     the raw references that BLEU compares it with. Either way SentencePiece drops leading and
//     trailing spaces and collapses runs of spaces (remove_extra_whitespaces).
//   - the training sentences come from define's own reader (data/text_lines.h), not SentencePiece's
//     file reader: an empty file or invalid UTF-8 is an error naming file:line, and file names
//     with commas work. SentencePiece still leaves lines over 4,192 bytes out of training
//     (max_sentence_length; Multi30k has none); they encode all the same.
//
// Determinism: the model is a function of the input text and the options. SentencePiece draws
// random numbers only to sample the input (input_sentence_size > 0), and that sampler has its own
// fixed seed (SentencePiece 0.1.97 ignores SetRandomGeneratorSeed there, and its trainer exposes no
// seed, hence SubwordOptions has none). Two trainings give byte-identical .model files
// (tests/data/subword_test.cpp checks it, sampled or not). The thread count is part of the options:
// a unigram model's scores are float sums split across threads, and the .model records the trainer
// options, so a model trained with 1 thread differs from one trained with 2.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace define::data {

struct SubwordOptions {
  // "bpe" or "unigram" (SentencePiece's "word" and "char" work too).
  std::string model_type = "bpe";
  // Pieces in all, the 4 special ones included. Exact (SentencePiece's hard_vocab_limit): a corpus
  // too small to fill it is an error.
  std::int64_t vocab_size = 8000;
  // Fraction of the characters covered by single-character pieces; the rarest rest become unk.
  double character_coverage = 1.0;
  // SentencePiece's normalization_rule_name ("identity", "nmt_nfkc", "nfkc", ...).
  std::string normalization = "identity";
  // Characters outside the vocabulary are spelt as UTF-8 byte pieces instead of becoming unk, so
  // every text round-trips; the 256 byte pieces count in vocab_size.
  bool byte_fallback = false;
  // Trainer threads, 1 .. 128. Part of what makes a model reproducible (see above).
  std::int64_t threads = 2;
  // 0: train on every line. More than 100: on that many lines sampled by SentencePiece (reservoir
  // sampling with its fixed seed, so still reproducible): for corpora of millions of lines (WMT),
  // where SentencePiece would otherwise hold and count them all.
  std::int64_t input_sentence_size = 0;
};

class Subword {
 public:
  // Trains a joint model on the lines of `files` (all of them, in order), writes <prefix>.model and
  // <prefix>.vocab (one "piece<TAB>score" a line, as spm_train writes it), each atomically
  // (core/atomic_file.h), and returns the model. Refuses no files, an empty or missing file,
  // invalid UTF-8 (file:line), options SentencePiece rejects (its message is passed on), and a
  // prefix whose folder does not exist.
  static Subword train(const std::vector<std::filesystem::path>& files, const SubwordOptions& opt,
                       const std::filesystem::path& prefix);
  // Loads a .model file. Refuses a missing or unreadable file, one that is not a SentencePiece
  // model, and a model without pad, unk, bos or eos (each of them naming the file).
  static Subword load(const std::filesystem::path& model_file);
  // The same from the bytes of a .model file; `source` names it in errors.
  static Subword from_bytes(std::string bytes, std::string_view source);

  // The pieces of one line, no bos / eos added. Throws on invalid UTF-8. Empty (or all-space) text
  // gives no ids.
  std::vector<std::int32_t> encode(std::string_view line) const;
  // The text of `ids`. pad, bos and eos are skipped wherever they stand (so a beam-search output
  // with its eos, or a padded column, decodes as is); unk decodes as " ⁇ " (SentencePiece's
  // surface for it). An id outside [0, size()) is an error naming it.
  std::string decode(const std::vector<std::int32_t>& ids) const;
  // The same for int64 ids (a tensor's values). A span, not a vector, so that a braced list
  // (decode({5, 6})) is not ambiguous between the two.
  std::string decode(std::span<const std::int64_t> ids) const;

  std::int64_t size() const;
  std::int32_t pad_id() const { return pad_; }
  std::int32_t unk_id() const { return unk_; }
  std::int32_t bos_id() const { return bos_; }
  std::int32_t eos_id() const { return eos_; }
  // The piece of an id ("▁the", "<pad>"); an id outside [0, size()) is an error.
  std::string piece(std::int32_t id) const;

  // The serialized model, exactly the bytes of the .model file.
  const std::string& bytes() const { return bytes_; }
  // "<size> pieces, CRC-32 <8 hex digits of bytes()>": recorded in checkpoints, so that a model
  // trained with one subword model is never run with another.
  std::string fingerprint() const;

 private:
  Subword() = default;
  // Shared: a Subword is cheap to copy, and the processor's encode / decode are const.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_;
  std::int32_t pad_ = -1, unk_ = -1, bos_ = -1, eos_ = -1;
};

}  // namespace define::data
