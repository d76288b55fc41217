// Reading a whole text file for the data readers (corpora, BLEU's hypothesis and reference files).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace define::data {

// The file's bytes. Refuses a missing file, a folder and an unreadable file with a define::Error
// "<who>: ..." naming the path.
std::string read_text_file(const std::filesystem::path& path, std::string_view who);

}  // namespace define::data
