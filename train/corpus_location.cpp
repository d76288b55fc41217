#include "train/corpus_location.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace define::train {
namespace {

namespace fs = std::filesystem;

bool has_files(const fs::path& dir, const std::vector<std::string>& files) {
  // The error_code forms: a corpus name the system refuses (too long) is just not found.
  std::error_code ec;
  for (const auto& f : files)
    if (!fs::exists(dir / f, ec)) return false;
  return true;
}

}  // namespace

std::string find_corpus(const std::string& name) {
  // WikiText's own file names (wiki.train.tokens, ...) are read as they are (data::corpus_files_in).
  try {
    return find_corpus(name, {"train.txt", "valid.txt", "test.txt"});
  } catch (const Error&) {
    try {
      return find_corpus(name, {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"});
    } catch (const Error&) {
    }
    throw;
  }
}

std::string find_corpus(const std::string& name, const std::vector<std::string>& files) {
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("DEFINE_DATA_DIR")) {
    tried.push_back(fs::path(env) / name);
    if (has_files(tried.back(), files)) return tried.back().string();
  }
  std::vector<fs::path> starts = {fs::current_path()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (const fs::path& start : starts)
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      for (const fs::path& candidate : {dir / "shared" / "data" / name, dir / "data" / "cache" / name}) {
        if (has_files(candidate, files)) return candidate.string();
      }
      if (dir == dir.parent_path()) break;
    }
  fail("data",
       "corpus '{}' not found (looked in $DEFINE_DATA_DIR, shared/data/{} and data/cache/{} above {}); "
       "run `scripts/get-data {}` or set data.dir",
       name, name, name, fs::current_path().string(), name);
}

}  // namespace define::train
