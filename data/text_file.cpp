#include "data/text_file.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace define::data {

std::string read_text_file(const std::filesystem::path& path, std::string_view who) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(who, "file '{}' does not exist", path.string());
  if (std::filesystem::is_directory(path, ec)) fail(who, "'{}' is a folder, expected a text file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(who, "cannot open '{}' for reading", path.string());
  // Sized once from the file's length: a corpus of WikiText-103's size (0.5 GB) is read without
  // the doubling copies of a growing stream buffer.
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) {
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    if (static_cast<std::uintmax_t>(in.gcount()) == size && in.peek() == std::char_traits<char>::eof()) return text;
    in.clear();
    in.seekg(0);
  }
  std::ostringstream buf;  // a file that changed size while read, or one without a size (a pipe)
  buf << in.rdbuf();
  if (in.bad()) fail(who, "error while reading '{}'", path.string());
  return std::move(buf).str();
}

}  // namespace define::data
