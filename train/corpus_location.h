// Where a named corpus (ptb, wikitext-2, multi30k) lives on this machine: $DEFINE_DATA_DIR/<name>,
// else shared/data/<name> or data/cache/<name> in the current folder or any folder above it, or
// above the `define` executable (the repository's ../shared/data, the offline copies, and the
// cache scripts/get-data downloads into). Not found: an error that says to run scripts/get-data.
#pragma once

#include <string>
#include <vector>

namespace define::train {

// A language-model corpus: a folder with train.txt, valid.txt and test.txt.
std::string find_corpus(const std::string& name);
// Any corpus: a folder holding every one of `files` (e.g. train.de and train.en).
std::string find_corpus(const std::string& name, const std::vector<std::string>& files);

}  // namespace define::train
