// Reading raw text one line at a time, for the sentence-per-line files of machine translation
// (Multi30k, WMT): the subword trainer (data/subword.h) and the parallel reader (data/parallel.h)
// both read through TextLineReader, so they agree on what a line is and fail the same way.
//
// A line ends at '\n'; a last line without its '\n' still counts, and a trailing '\r' is dropped
// (a file saved with Windows line endings reads like the same file with '\n'). Every line must be
// valid UTF-8: SentencePiece would otherwise turn the bad bytes into <unk> silently, so a
// mis-encoded corpus (Latin-1, a truncated download) is an error naming file:line instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace define::data {

// The byte offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC
// 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or npos when `s` is valid.
std::size_t invalid_utf8_offset(std::string_view s);

class TextLineReader {
 public:
  // Opens `file`. Refuses a missing file, a folder, an unreadable file and an empty one (0 bytes:
  // no line at all), naming the path; `who` starts the messages ("load_parallel: ...").
  TextLineReader(const std::filesystem::path& file, std::string_view who);

  // Reads the next line into `line` (without '\n' or a trailing '\r'); false at the end of the
  // file. Throws "<who>: <file>:<line>: invalid UTF-8 (byte <k> of the line)" and on read errors.
  bool next(std::string& line);

  // The 1-based number of the line last returned by next() (0 before the first).
  std::int64_t line_number() const { return line_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::string who_;
  std::ifstream in_;
  std::int64_t line_ = 0;
};

}  // namespace define::data
