#include "support/corpora.h"

#include <cstdlib>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace define::test {

namespace fs = std::filesystem;

fs::path repo_root() {
  for (fs::path start : {fs::path(__FILE__).parent_path(), fs::current_path()}) {
    for (fs::path p = start; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p / "scripts" / "get-data") && fs::exists(p / "data" / "corpus.h")) return p;
      if (p == p.parent_path()) break;
    }
  }
  return {};
}

fs::path shared_corpus(const std::string& name, const std::string& marker) {
  if (const char* env = std::getenv("DEFINE_DATA_DIR"); env && *env && fs::exists(fs::path(env) / name / marker))
    return fs::path(env) / name;
  const fs::path root = repo_root();
  if (!root.empty() && fs::exists(root.parent_path() / "shared" / "data" / name / marker))
    return root.parent_path() / "shared" / "data" / name;
  return {};
}

std::vector<std::string> made_up_sentences(int n, std::uint64_t seed, bool accents) {
  static const std::vector<std::string> plain = {"ka", "lo", "mi", "tor", "ein", "der", "und", "sch", "an", "ve",
                                                 "ru", "pel", "sto", "gi", "nar", "qu", "ox", "fen", "bi", "dam"};
  static const std::vector<std::string> extra = {"ä", "ö", "ü", "ß", "é", "mä", "tö", "grü"};
  std::uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  const auto draw = [&](std::uint64_t k) {  // a 64-bit LCG's high bits: uniform enough for made-up words
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % k;
  };
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    std::string line;
    const std::uint64_t words = 3 + draw(10);
    for (std::uint64_t w = 0; w < words; ++w) {
      if (w > 0) line += ' ';
      const std::uint64_t syllables = 1 + draw(3);
      for (std::uint64_t s = 0; s < syllables; ++s) {
        if (accents && draw(4) == 0)
          line += extra[draw(extra.size())];
        else
          line += plain[draw(plain.size())];
      }
    }
    lines.push_back(line + ".");
  }
  return lines;
}

std::string as_text(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + '\n';
  return text;
}

std::vector<fs::path> write_made_up_bitext(const TempDir& d) {
  return {d.write("train.de", as_text(made_up_sentences(600, 1, true))),
          d.write("train.en", as_text(made_up_sentences(600, 2, false)))};
}

}  // namespace define::test
