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
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) fail(who, "error while reading '{}'", path.string());
  return std::move(buf).str();
}

}  // namespace define::data
