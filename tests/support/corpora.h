// Shared by the data tests: scratch folders and the shared corpora beside the checkout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/common.h"  // TempDir

namespace define::test {

// The repository root: the folder holding scripts/get-data, found from this source file's path
// (absolute in CMake builds) or, failing that, from the working directory upwards. Empty if none.
std::filesystem::path repo_root();

// A shared corpus folder as scripts/get-data looks for it: $DEFINE_DATA_DIR/<name>, then
// <repo>/../shared/data/<name>. Empty when neither holds `marker` (a file every copy has).
std::filesystem::path shared_corpus(const std::string& name, const std::string& marker = "train.txt");

// `n` sentences of a made-up language, for training small subword models: 3 to 12 words of 1 to 3
// syllables, single spaces, a final '.'. With `accents` the syllables include ä, ö, ü, ß and é
// (multi-byte UTF-8). Deterministic in (n, seed, accents).
std::vector<std::string> made_up_sentences(int n, std::uint64_t seed, bool accents);
// The lines joined, each followed by '\n'.
std::string as_text(const std::vector<std::string>& lines);
// Writes d / "train.de" (600 made-up sentences with accents, seed 1) and d / "train.en" (600
// without, seed 2): a "language pair" to train small subword models on. Returns the two paths.
std::vector<std::filesystem::path> write_made_up_bitext(const TempDir& d);

}  // namespace define::test
