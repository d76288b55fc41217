#include "tools/corpus_location.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace define::cli {
namespace {

namespace fs = std::filesystem;

bool has_splits(const fs::path& dir) {
  // The error_code forms: a corpus name the system refuses (too long) is just not found.
  std::error_code ec;
  return fs::exists(dir / "train.txt", ec) && fs::exists(dir / "valid.txt", ec) && fs::exists(dir / "test.txt", ec);
}

}  // namespace

std::string find_corpus(const std::string& name) {
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("DEFINE_DATA_DIR")) {
    tried.push_back(fs::path(env) / name);
    if (has_splits(tried.back())) return tried.back().string();
  }
  std::vector<fs::path> starts = {fs::current_path()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (const fs::path& start : starts)
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      for (const fs::path& candidate : {dir / "shared" / "data" / name, dir / "data" / "cache" / name}) {
        if (has_splits(candidate)) return candidate.string();
      }
      if (dir == dir.parent_path()) break;
    }
  fail("data", "corpus '{}' not found (looked in $DEFINE_DATA_DIR, shared/data/{} and data/cache/{} above {}); "
       "run `tools/get-data {}` or set data.dir",
       name, name, name, fs::current_path().string(), name);
}

}  // namespace define::cli
