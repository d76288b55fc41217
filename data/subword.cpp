#include "data/subword.h"

#include <exception>
#include <fstream>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <zlib.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/text_lines.h"

namespace define::data {

namespace {

namespace spm = sentencepiece;

// The training sentences for SentencePiece: the lines of every file in turn, read by
// TextLineReader. The files are streamed (SentencePiece keeps its own copy of the sentences), and
// an error while reading (invalid UTF-8 at file:line) ends the iteration and is kept, so that
// train() can rethrow define's own message instead of throwing through SentencePiece's code.
class FileLines : public spm::SentenceIterator {
 public:
  explicit FileLines(const std::vector<std::filesystem::path>& files) : files_(files) { advance(); }

  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  spm::util::Status status() const override {
    if (error_) return spm::util::Status(spm::util::StatusCode::kDataLoss, "reading the training text failed");
    return {};
  }
  std::exception_ptr error() const { return error_; }

 private:
  void advance() {
    try {
      while (!done_) {
        if (!reader_) {
          if (next_file_ == files_.size()) {
            done_ = true;
            return;
          }
          reader_ = std::make_unique<TextLineReader>(files_[next_file_++], "Subword::train");
        }
        if (reader_->next(line_)) return;
        reader_.reset();
      }
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
  }

  const std::vector<std::filesystem::path>& files_;
  std::size_t next_file_ = 0;
  std::unique_ptr<TextLineReader> reader_;
  std::string line_;
  bool done_ = false;
  std::exception_ptr error_;
};

std::string read_model_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("Subword::load", "model file '{}' does not exist", path.string());
  if (std::filesystem::is_directory(path, ec))
    fail("Subword::load", "'{}' is a folder, expected a SentencePiece .model file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("Subword::load", "cannot open '{}' for reading", path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) fail("Subword::load", "error while reading '{}'", path.string());
  return std::move(buf).str();
}

// spm_train's .vocab format: "<piece>\t<score>\n" per id, the score as an ostream prints a float,
// so the file matches the one SentencePiece's own trainer would have written.
std::string vocab_text(const spm::SentencePieceProcessor& sp) {
  std::ostringstream out;
  for (int i = 0; i < sp.GetPieceSize(); ++i) out << sp.IdToPiece(i) << '\t' << sp.GetScore(i) << '\n';
  return std::move(out).str();
}

}  // namespace

Subword Subword::train(const std::vector<std::filesystem::path>& files, const SubwordOptions& opt,
                       const std::filesystem::path& prefix) {
  constexpr std::string_view who = "Subword::train";
  if (files.empty()) fail(who, "no training files given");
  // The four special pieces take ids 0..3; SentencePiece needs room for at least one more.
  if (opt.vocab_size <= 4) fail(who, "vocab_size must be more than the 4 special pieces, got {}", opt.vocab_size);
  if (opt.vocab_size > (std::int64_t{1} << 31) - 1) fail(who, "vocab_size {} does not fit an int32 id", opt.vocab_size);
  if (opt.threads < 1 || opt.threads > 128) fail(who, "threads must be in [1, 128], got {}", opt.threads);
  if (!(opt.character_coverage > 0.0 && opt.character_coverage <= 1.0))
    fail(who, "character_coverage must be in (0, 1], got {}", opt.character_coverage);
  if (opt.input_sentence_size != 0 && opt.input_sentence_size <= 100)
    fail(who, "input_sentence_size must be 0 (every line) or more than 100, got {}", opt.input_sentence_size);
  if (prefix.filename().empty()) fail(who, "model prefix '{}' names no file", prefix.string());
  // Checked before training, which takes seconds to minutes, rather than when writing after it.
  const std::filesystem::path dir = prefix.parent_path().empty() ? std::filesystem::path(".") : prefix.parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail(who, "the folder '{}' of model prefix '{}' does not exist", dir.string(), prefix.string());
  // Every file is opened once up front, so a missing or empty one fails at once, not after the
  // files before it have been read.
  for (const auto& f : files) {
    const TextLineReader open_check(f, who);
  }

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", opt.model_type},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"character_coverage", fmt::format("{}", opt.character_coverage)},
      {"normalization_rule_name", opt.normalization},
      {"byte_fallback", opt.byte_fallback ? "true" : "false"},
      {"num_threads", std::to_string(opt.threads)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      // 0 (the default): every sentence, in file order. Sampling (> 0) uses SentencePiece's fixed seed.
      {"input_sentence_size", std::to_string(opt.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      // SentencePiece logs every step of training at INFO; warnings and errors still show.
      {"minloglevel", "1"},
  };
  FileLines lines(files);
  std::string serialized;
  const spm::util::Status st = spm::SentencePieceTrainer::Train(args, &lines, &serialized);
  if (lines.error()) std::rethrow_exception(lines.error());
  if (!st.ok()) fail(who, "SentencePiece refused to train on {} file(s): {}", files.size(), st.ToString());

  std::filesystem::path model_path = prefix, vocab_path = prefix;
  model_path += ".model";
  vocab_path += ".vocab";
  Subword sw = from_bytes(std::move(serialized), model_path.string());
  write_file_atomically(vocab_path.string(), vocab_text(*sw.sp_));
  // The model last: a .model on disk always comes with the .vocab of the same training.
  write_file_atomically(model_path.string(), sw.bytes_);
  return sw;
}

Subword Subword::load(const std::filesystem::path& model_file) {
  std::string bytes = read_model_file(model_file);
  if (bytes.empty()) fail("Subword::load", "model file '{}' is empty (0 bytes)", model_file.string());
  return from_bytes(std::move(bytes), model_file.string());
}

Subword Subword::from_bytes(std::string bytes, std::string_view source) {
  auto sp = std::make_shared<spm::SentencePieceProcessor>();
  // SentencePiece reports most damage as a status but lets some through as exceptions of its own:
  // darts-clone's Darts::Details::Exception for a piece that starts with a NUL byte ("zero-length
  // key": its trie holds NUL-terminated keys). Found by tests/fuzz/fuzz_subword.
  spm::util::Status st;
  try {
    st = sp->LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    fail("Subword::load", "'{}' is not a valid SentencePiece model: its pieces cannot be indexed ({})", source,
         e.what());
  }
  if (!st.ok()) fail("Subword::load", "'{}' is not a valid SentencePiece model: {}", source, st.ToString());
  Subword sw;
  sw.pad_ = sp->pad_id();
  sw.unk_ = sp->unk_id();
  sw.bos_ = sp->bos_id();
  sw.eos_ = sp->eos_id();
  // Batches pad with pad, decoders start at bos and stop at eos: a model lacking one (spm_train's
  // default has no pad) cannot be used for translation here.
  const std::initializer_list<std::pair<const char*, std::int32_t>> specials = {
      {"pad", sw.pad_}, {"unk", sw.unk_}, {"bos", sw.bos_}, {"eos", sw.eos_}};
  for (const auto& [name, id] : specials)
    if (id < 0 || id >= sp->GetPieceSize())
      fail("Subword::load", "'{}' has no {} piece (train with pad_id, unk_id, bos_id, eos_id set)", source, name);
  sw.sp_ = std::move(sp);
  sw.bytes_ = std::move(bytes);
  return sw;
}

std::vector<std::int32_t> Subword::encode(std::string_view line) const {
  if (const std::size_t bad = invalid_utf8_offset(line); bad != std::string_view::npos)
    fail("Subword::encode", "invalid UTF-8 (byte {} of the text is 0x{:02x})", bad + 1, static_cast<unsigned char>(line[bad]));
  std::vector<int> ids;
  if (const spm::util::Status st = sp_->Encode(line, &ids); !st.ok()) fail("Subword::encode", "{}", st.ToString());
  return {ids.begin(), ids.end()};
}

std::string Subword::decode(const std::vector<std::int32_t>& ids) const {
  const std::vector<std::int64_t> wide(ids.begin(), ids.end());
  return decode(std::span<const std::int64_t>(wide));
}

std::string Subword::decode(std::span<const std::int64_t> ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t id = ids[i];
    if (id < 0 || id >= size())
      fail("Subword::decode", "id {} (position {}) is outside the vocabulary [0, {})", id, i, size());
    if (id == pad_ || id == bos_ || id == eos_) continue;
    kept.push_back(static_cast<int>(id));
  }
  std::string text;
  if (const spm::util::Status st = sp_->Decode(kept, &text); !st.ok()) fail("Subword::decode", "{}", st.ToString());
  return text;
}

std::int64_t Subword::size() const { return sp_->GetPieceSize(); }

std::string Subword::piece(std::int32_t id) const {
  if (id < 0 || id >= size()) fail("Subword::piece", "id {} is outside the vocabulary [0, {})", id, size());
  return sp_->IdToPiece(id);
}

std::string Subword::fingerprint() const {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes_.data()), static_cast<uInt>(bytes_.size()));
  return fmt::format("{} pieces, CRC-32 {:08x}", size(), static_cast<std::uint32_t>(crc));
}

}  // namespace define::data
