#include "data/text_lines.h"

#include <system_error>

#include "core/error.h"

namespace define::data {

std::size_t invalid_utf8_offset(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto is_cont = [&](std::size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Length of the sequence and the allowed range of its second byte (Unicode Table 3-7): the
    // narrowed ranges after E0, ED, F0 and F4 exclude overlong forms, surrogates and > U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;  // a continuation byte out of place, C0/C1 (overlong) or F5..FF
    }
    if (i + 1 >= s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if (!is_cont(i + k)) return i;
    i += len;
  }
  return std::string_view::npos;
}

TextLineReader::TextLineReader(const std::filesystem::path& file, std::string_view who) : path_(file), who_(who) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) fail(who_, "file '{}' does not exist", file.string());
  if (std::filesystem::is_directory(file, ec)) fail(who_, "'{}' is a folder, expected a text file", file.string());
  in_.open(file, std::ios::binary);
  if (!in_) fail(who_, "cannot open '{}' for reading", file.string());
  if (in_.peek() == std::ifstream::traits_type::eof()) {
    if (in_.bad()) fail(who_, "error while reading '{}'", file.string());
    fail(who_, "file '{}' is empty (0 bytes): expected one sentence a line", file.string());
  }
}

bool TextLineReader::next(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) fail(who_, "error while reading '{}' after line {}", path_.string(), line_);
    return false;
  }
  ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (const std::size_t bad = invalid_utf8_offset(line); bad != std::string_view::npos)
    fail(who_, "{}:{}: invalid UTF-8 (byte {} of the line is 0x{:02x})", path_.string(), line_, bad + 1,
         static_cast<unsigned char>(line[bad]));
  return true;
}

}  // namespace define::data
